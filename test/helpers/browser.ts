// Debian's chromium, headless, driven by playwright-core with a fresh profile; pages that record their console errors.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Where screenshots go: build/artifacts/<suite>/, beside what CI keeps of a run. */
export function artifactsDir(suite: string): string {
  const dir = join(process.cwd(), 'build', 'artifacts', suite);
  mkdirSync(dir, { recursive: true });
  return dir;
}

export interface Browser {
  /** A new page of the given size; what it logs as an error lands in `errors`. */
  page(viewport: { width: number; height: number }, scale?: number): Promise<Page>;
  /** Console errors and uncaught exceptions of every page. */
  readonly errors: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'sluice-chromium-'));
  const errors: string[] = [];
  // A persistent context is how playwright takes a profile directory of our own (a fresh one).
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
    ],
  });
  return {
    errors,
    async page(viewport, scale = 1) {
      const page = await context.newPage();
      await page.setViewportSize(viewport);
      if (scale !== 1) {
        const session = await context.newCDPSession(page);
        await session.send('Emulation.setDeviceMetricsOverride', {
          width: viewport.width,
          height: viewport.height,
          deviceScaleFactor: scale,
          mobile: true,
        });
      }
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => errors.push(`page: ${error.message}`));
      return page;
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
