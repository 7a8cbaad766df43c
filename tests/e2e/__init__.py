"""Browser tests: the real dashboard served on a free port, driven in headless Chromium by Playwright."""
