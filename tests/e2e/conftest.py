"""Browser-test settings: Playwright's assertions wait up to 30 s (not its default 5 s) for the page to show what
they expect. Each assertion still waits on the page's own state, never on a fixed sleep; the longer bound only
keeps a loaded 2-core machine (a CI run beside other work) from failing a test that a moment more would pass."""

from playwright.sync_api import expect

expect.set_options(timeout=30_000)
