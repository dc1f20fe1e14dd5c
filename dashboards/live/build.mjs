// Bundles the live page into dist/: main.js, main.css and the fonts they name (node build.mjs).
import { build } from 'esbuild';

// The Perses packages ship an ES module and a CommonJS build each, and some of them require()
// the others: left alone, esbuild bundles both builds of @perses-dev/plugin-system and of
// @tanstack/react-query, and the two copies' React contexts differ ("No QueryClient set").
// Every import of them is pinned to one build, the ES module.
const perses = ['core', 'components', 'plugin-system', 'dashboards', 'explore'];
const alias = Object.fromEntries(perses.map((p) => [`@perses-dev/${p}`, `./node_modules/@perses-dev/${p}/dist/index.js`]));
alias['@tanstack/react-query'] = './node_modules/@tanstack/react-query/build/lib/index.mjs';

await build({
  entryPoints: { main: 'src/main.jsx' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2020',
  outdir: 'dist',
  alias,
  loader: { '.js': 'jsx', '.woff': 'file', '.woff2': 'file' },
  assetNames: '[name]',
  // Node's names some dependencies still read.
  define: { 'process.env.NODE_ENV': '"production"', global: 'globalThis' },
  logLevel: 'warning',
});
