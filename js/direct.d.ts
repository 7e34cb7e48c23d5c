// The in-thread variant has the same API as index.js, plus the error conversion helper.
export * from './index.js';
import type { WeftError } from './index.js';
export declare function toWeftError(e: unknown): WeftError;
