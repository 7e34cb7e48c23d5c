// `@playwright/test` as the browser specs see it when this directory's config runs them (its
// tsconfig maps the name here): Playwright's runner, `expect` and fixtures, with `page` served by
// another engine (engines.ts). The specs themselves are unchanged.
import { test as base, expect } from 'playwright/test';
import { launchFirefox, launchWebKit, type Engine, type EngineBrowser } from './engines';

export { expect };
export * from 'playwright/test';

type WorkerFixtures = { engine: Engine; webkitFeatures: string; engineBrowser: EngineBrowser };

export const test = base.extend<object, WorkerFixtures>({
  engine: ['firefox', { option: true, scope: 'worker' }],
  webkitFeatures: ['', { option: true, scope: 'worker' }],
  engineBrowser: [
    async ({ engine, webkitFeatures }, use) => {
      const browser = engine === 'firefox' ? await launchFirefox() : await launchWebKit(webkitFeatures || undefined);
      console.log(`engine: ${browser.version}`);
      await use(browser);
      await browser.close();
    },
    { scope: 'worker', timeout: 120_000 },
  ],
  page: async ({ engineBrowser, baseURL }, use) => {
    const page = await engineBrowser.newPage(baseURL!);
    await use(page as never);
    await page.close();
  },
});
