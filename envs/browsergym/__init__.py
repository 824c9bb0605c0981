"""clew.envs.browsergym: BrowserGym tasks (MiniWoB++ offline; WebArena and others with their
servers) as clew environments (docs/web.md). Importing it imports neither BrowserGym nor
Playwright."""
