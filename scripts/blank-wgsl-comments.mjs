// Blanks the comments of the WGSL sources compiled into a wasm module, in place:
//
//   node scripts/blank-wgsl-comments.mjs www/pkg/weft_bg.wasm
//
// The shaders reach the module as text (`include_str!`, several of them concatenated into more
// than one kernel's source), comments included: blanking them took 23 KB off the gzipped
// single-thread module. Each `// ...` up to its newline becomes spaces of the same length, so
// every string keeps its address and length, line numbers in shader compiler messages stay
// those of the files, and runs of spaces cost gzip almost nothing. WGSL has no string literals, so `//`
// always starts a comment; a comment without a newline after it (at the end of a file, where a
// concatenated source may continue it) is kept.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [wasmPath, shaderDir = 'shaders'] = process.argv.slice(2);
if (!wasmPath) throw new Error('usage: blank-wgsl-comments.mjs MODULE.wasm [SHADER_DIR]');

// Byte by byte: UTF-8 continuation and lead bytes are all >= 0x80, so they are never taken for
// '/' or a newline, and a comment's bytes (non-ASCII ones included) all become spaces.
function blank(source) {
  const out = Buffer.from(source);
  for (let i = 0; i + 1 < out.length; i++) {
    if (out[i] !== 0x2f || out[i + 1] !== 0x2f) continue;
    const end = out.indexOf(0x0a, i);
    if (end < 0) break;
    out.fill(0x20, i, end);
    i = end;
  }
  return out;
}

const module = readFileSync(wasmPath);
let files = 0;
let copies = 0;
for (const name of readdirSync(shaderDir).filter((n) => n.endsWith('.wgsl')).sort()) {
  const original = readFileSync(join(shaderDir, name));
  const blanked = blank(original);
  if (blanked.equals(original)) continue;
  let found = 0;
  for (let at = module.indexOf(original); at >= 0; at = module.indexOf(original, at + original.length)) {
    blanked.copy(module, at);
    found++;
  }
  if (found) files++;
  copies += found;
}
// A module with no shader text found means the step no longer applies (sources stored some
// other way): say so rather than print a size that silently lost this saving.
if (files === 0) throw new Error(`no WGSL source of ${shaderDir} found in ${wasmPath}`);
writeFileSync(wasmPath, module);
console.log(`${wasmPath}: comments blanked in ${files} WGSL sources (${copies} copies)`);
