/**
 * The operator console's build (scripts/build.ts runs it into dist/console/). Preact's JSX
 * through esbuild, no plugin; every asset named by its hash so the server can cache it forever;
 * no inline script or style, so the page runs under a CSP without 'unsafe-inline'.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  logLevel: 'warn',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    emptyOutDir: true,
    target: 'es2022',
    // Vite would inline small assets as data: URLs and the module preload helper as a script.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
