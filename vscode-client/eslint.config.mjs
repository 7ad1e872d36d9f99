// Flat ESLint config: recommended JS + typescript-eslint rules for the extension sources.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['out/**', 'node_modules/**', 'e2e/screenshots/**', 'e2e/.work/**', '*.vsix'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.ts'],
    rules: {
      eqeqeq: ['error', 'always'],
      curly: 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['**/*.mjs', 'e2e/**/*.mjs'],
    languageOptions: {
      sourceType: 'module',
      // Node globals, plus `document` for the callbacks that e2e.mjs runs inside the page.
      globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', URL: 'readonly', document: 'readonly' },
    },
  },
);
