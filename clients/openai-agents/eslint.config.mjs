// Lint of the store (as built: typescript-eslint does not take the
// TypeScript this package compiles with; tsc --noEmit with the strict
// flags of package.json's lint checks the source) and of its tests.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["dist/**/*.js", "test/**/*.mjs", "eslint.config.mjs"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { ...globals.node } },
    rules: { "no-unused-vars": ["error", { args: "all", argsIgnorePattern: "^_", ignoreRestSiblings: true }], eqeqeq: "error", "prefer-const": "error" },
  },
];
