import { test, expect } from '@playwright/test';

// www/search.html end to end: the model loads, the passages are embedded with a progress bar,
// a query ranks them by cosine, the best one is the relevant passage; a screenshot is kept.
// After a reload the same passages come back from IndexedDB, ranked the same; "Forget stored"
// empties it.

test('search page embeds passages and ranks them for a query', async ({ page }) => {
  test.setTimeout(300_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto('/search.html');
  await expect(page.locator('#embed')).toBeEnabled({ timeout: 120_000 });
  await expect(page.locator('#status')).toContainText('384 dimensions');
  await page.locator('#passages').fill(
    [
      'Mix flour, water, salt and yeast, knead the dough, let it rise, then bake at 230 degrees.',
      'The cheetah can reach speeds of over 100 kilometres per hour in short bursts.',
      'Paris is the capital and most populous city of France.',
      'Backpropagation computes gradients of the loss with respect to every weight.',
      'Keep your bedroom dark and cool, and avoid screens before going to bed.',
      '',
      'Caffeine late in the day can make it harder to fall asleep.',
    ].join('\n'),
  );
  await page.locator('#embed').click();
  await expect(page.locator('#query')).toBeEnabled({ timeout: 120_000 });
  await expect(page.locator('#status')).toContainText('6 passages embedded');
  expect(await page.locator('#progress').evaluate((p: HTMLProgressElement) => p.value)).toBe(1);

  await page.locator('#query').fill('How can I sleep better?');
  await page.locator('#search').click();
  const items = page.locator('#results li');
  await expect(items).toHaveCount(6);
  const scores = (await page.locator('#results .score').allTextContents()).map(Number);
  expect([...scores].sort((a, b) => b - a)).toEqual(scores);
  const top2 = await page.locator('#results .passage').evaluateAll((els) => els.slice(0, 2).map((e) => e.textContent));
  expect(top2.some((t) => t?.includes('bedroom'))).toBe(true);
  expect(top2.some((t) => t?.includes('Caffeine'))).toBe(true);
  expect(scores[0]).toBeGreaterThan(0.3);
  expect(scores[5]).toBeLessThan(0.2);

  await page.locator('#query').fill('What is the capital of France?');
  await page.locator('#search').click();
  await expect(page.locator('#results .passage').first()).toContainText('Paris');
  await page.screenshot({ path: 'test-results/search.png', fullPage: true });

  const passages = await page.locator('#passages').inputValue();
  await page.reload();
  await expect(page.locator('#embed')).toBeEnabled({ timeout: 120_000 });
  await page.locator('#passages').fill(passages);
  await page.locator('#embed').click();
  await expect(page.locator('#status')).toContainText('6 passages embedded (6 read from IndexedDB)', { timeout: 60_000 });
  await page.locator('#query').fill('What is the capital of France?');
  await page.locator('#search').click();
  await expect(page.locator('#results .passage').first()).toContainText('Paris');

  await page.locator('#forget').click();
  await expect(page.locator('#status')).toContainText('removed');
  await page.locator('#embed').click();
  await expect(page.locator('#query')).toBeEnabled({ timeout: 120_000 });
  await expect(page.locator('#status')).toContainText('6 passages embedded in', { timeout: 120_000 });
  expect(errors).toEqual([]);
});
