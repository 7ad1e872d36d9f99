// Bundles the extension into out/extension.js (CommonJS, Node, `vscode` external).
// Usage: node esbuild.mjs [--dev] [--watch]
import * as esbuild from 'esbuild';

const dev = process.argv.includes('--dev');
const watch = process.argv.includes('--watch');

const options = {
  entryPoints: ['src/extension.ts'],
  bundle: true,
  outfile: 'out/extension.js',
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  external: ['vscode'],
  minify: !dev,
  sourcemap: dev ? 'inline' : false,
  legalComments: 'none',
  logLevel: 'info',
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
