/**
 * The read tools' parameters, written once in zod: the routes validate query strings with them,
 * the MCP tools' input schemas and the OpenAPI document are made from them, and so are the
 * command line's flags (cli/tools.ts). It imports zod and core/ only, so the command line loads
 * nothing of the service with it.
 */
import { z } from 'zod';
import { DEFAULT_FIND_LIMIT, MAX_FIND_LIMIT } from '../../core/read-limits.js';

const MAX = Number.MAX_SAFE_INTEGER;

/** Globs compile to regular expressions; past this they are refused rather than left to fail. */
const MAX_GLOB_CHARS = 4096;

/** The names of the four read tools. */
export const TOOLS = ['ls', 'find', 'cat', 'grep'] as const;

/** The four read tools. */
export type Tool = (typeof TOOLS)[number];

/** The output modes of grep. */
export const GREP_OUTPUT_MODES = ['files_with_matches', 'content', 'count'] as const;

/** Each read tool's parameters (query string over HTTP, arguments over MCP). */
export const READ_PARAMS = {
  grep: z.strictObject({
    pattern: z.string().min(1).describe('RE2 regular expression, e.g. "fn\\s+\\w+" or "TODO|FIXME". Escape literal metacharacters: "\\(". At most 16 KiB.'),
    path: z.string().optional().describe('Directory (or one file) to search; default / (the whole workspace).'),
    glob: z
      .string()
      .min(1)
      .max(MAX_GLOB_CHARS)
      .optional()
      .describe('Only files whose path matches this glob, as ripgrep --glob: "*.md", "src/**/*.ts", "!*.min.js".'),
    type: z.string().min(1).optional().describe('Only files of this ripgrep file type: "md", "py", "ts", "js", "rust", "go", "c", "json", ...'),
    output_mode: z
      .enum(GREP_OUTPUT_MODES)
      .default('files_with_matches')
      .describe('files_with_matches: paths; content: matching lines with path and line number; count: matching lines per file.'),
    '-i': z.boolean().default(false).describe('Case-insensitive search.'),
    '-A': z.int().min(0).max(MAX).optional().describe('Lines of context after each match (content mode).'),
    '-B': z.int().min(0).max(MAX).optional().describe('Lines of context before each match (content mode).'),
    '-C': z.int().min(0).max(MAX).optional().describe('Lines of context before and after each match (content mode), where -A or -B is not given.'),
    '-n': z.boolean().default(true).describe('Line numbers in content mode.'),
    head_limit: z.int().min(1).max(MAX).optional().describe('Most entries to print (files, or lines in content mode); default all. Use with offset to page.'),
    offset: z.int().min(0).max(MAX).default(0).describe('Entries to skip first (files, or content lines not counting "--"); to continue a cut result.'),
    multiline: z.boolean().default(false).describe('Let matches span lines and "." match a newline (ripgrep -U). Without it a pattern may not contain "\\n".'),
  }),
  find: z.strictObject({
    pattern: z
      .string()
      .min(1)
      .max(MAX_GLOB_CHARS)
      .describe(
        'Glob matched against paths relative to `path`: "**/*.md", "src/**/*.ts". A bare name matches only that exact name; "**/*name*" finds it anywhere.',
      ),
    path: z.string().optional().describe('Directory to search under; default /.'),
    head_limit: z.int().min(1).max(MAX_FIND_LIMIT).default(DEFAULT_FIND_LIMIT).describe('Most paths to print.'),
  }),
  cat: z.strictObject({
    path: z.string().min(1).describe('The file to read, e.g. /docs/guide.md.'),
    offset: z.int().min(1).max(MAX).default(1).describe('1-based first line to print; use a line number grep reported, less a few lines of context.'),
    limit: z.int().min(1).max(MAX).default(2000).describe('Most lines to print.'),
  }),
  ls: z.strictObject({
    path: z.string().optional().describe("Directory to list; default /. A file path gives that file's entry."),
  }),
} satisfies Record<Tool, z.ZodObject>;
