import { test, expect } from '@playwright/test';

// The demo's model picker: presets fill the URL and the quantization, any URL can be typed (a
// GGUF or weft file, or a Hugging Face folder ending in /), and a loaded model shows its
// architecture and how its weights are stored. The tiny architecture fixtures load in seconds.

test('model picker: presets, a typed folder URL and a GGUF, each architecture shown', async ({ page }) => {
  test.setTimeout(180_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto('/');
  await expect(page.locator('#load')).toBeEnabled();

  await expect(page.locator('#model-url')).toHaveValue('models/SmolLM2-135M-Instruct.Q4_1.gguf');
  expect(await page.locator('#model-preset option').count()).toBeGreaterThanOrEqual(4);
  await page.selectOption('#model-preset', { index: 3 });
  await expect(page.locator('#model-url')).toHaveValue(/^https:\/\/huggingface\.co\/.+\/resolve\/main\/$/);
  await expect(page.locator('#quantize')).toHaveValue('q4');

  // A typed URL is "another URL"; the folder's weights load as stored.
  await page.fill('#model-url', '/fixtures/gemma2-tiny/');
  await expect(page.locator('#model-preset')).toHaveValue('');
  await page.selectOption('#quantize', 'none');
  await page.selectOption('#backend', 'webgpu');
  await page.click('#load');
  await expect(page.locator('#load-state')).toHaveAttribute('data-state', 'ready', { timeout: 120_000 });
  await expect(page.locator('#arch-state')).toHaveText('gemma2');
  await expect(page.locator('#quant-state')).toHaveText('as stored in the file');
  await expect(page.locator('#model-name')).toHaveText('gemma2-tiny');

  await page.fill('#model-url', '/fixtures/phi3-tiny/model.gguf');
  await page.click('#load');
  await expect(page.locator('#model-name')).toHaveText('model.gguf', { timeout: 120_000 });
  await expect(page.locator('#load-state')).toHaveAttribute('data-state', 'ready');
  await expect(page.locator('#arch-state')).toHaveText('phi3');
  expect(errors).toEqual([]);
});
