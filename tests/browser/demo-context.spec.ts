import { test, expect } from '@playwright/test';

// The chat demo keeps a long conversation inside the model's context: once the history no
// longer fits, the oldest turns are left out of the prompt (and the reply says so) instead of
// the reply failing or shrinking to one token. A tiny weft file with a 256-position context.

const MODEL = 'fixtures/tiny/qwen2-tiny-q8.safetensors';

test('a long chat leaves the oldest turns out and every reply still comes', async ({ page }) => {
  test.setTimeout(180_000);
  await page.goto('/');
  await page.locator('#model-url').fill(MODEL);
  await page.locator('#max-context').selectOption('512');
  await page.locator('#load').click();
  await expect(page.locator('#load-state')).toHaveAttribute('data-state', 'ready', { timeout: 120_000 });
  // The file's own context (256) caps the 512 asked for.
  await expect(page.locator('#load-state')).toContainText('256 positions');
  await page.locator('#max-tokens').fill('4');
  // Each message is about 80 tokens: the third turn no longer fits beside the first two.
  const message = (i: number) => `turn ${i}: ` + 'hello world '.repeat(10);
  const dropped: number[] = [];
  for (let i = 0; i < 5; i++) {
    await page.locator('#prompt').fill(message(i));
    await page.locator('#send').click();
    const reply = page.locator('li.msg.assistant').nth(i);
    await expect(reply).not.toHaveClass(/streaming/, { timeout: 60_000 });
    await expect(page.locator('#send')).toBeEnabled();
    const classes = (await reply.getAttribute('class')) ?? '';
    const meta = (await reply.locator('.meta').textContent()) ?? '';
    console.log(`turn ${i}: ${classes}; ${meta}`);
    expect(classes).not.toContain('failed');
    // All 4 tokens of every reply (the old demo's replies shrank to one token past the context).
    expect(meta).toMatch(/^4 tokens/);
    dropped.push(Number(await reply.getAttribute('data-dropped')));
  }
  console.log(`messages left out per turn: ${dropped}`);
  expect(dropped[0]).toBe(0);
  expect(dropped[4]).toBeGreaterThan(0);
  await expect(page.locator('li.msg.assistant').nth(4).locator('.meta')).toContainText('left out to fit the context');
});
