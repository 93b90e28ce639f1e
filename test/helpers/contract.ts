/**
 * Checks HTTP responses against the OpenAPI document: the status must be one the document gives
 * the operation, the media type one it lists for that status, and a JSON body must match its
 * schema. Requests the document has no operation for (an unknown route, HEAD, a method an
 * endpoint refuses) are not checked.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule, { type FormatsPlugin } from 'ajv-formats';

type Json = Record<string, unknown>;

// ajv-formats is CommonJS: its function is the default export's default under ESM.
const addFormats = (addFormatsModule as unknown as { default: FormatsPlugin }).default;

/** What the document says one status of one operation answers: media type to body validator (null: not checked). */
type Answers = Map<string, ValidateFunction | null>;

interface Operation {
  pattern: RegExp;
  method: string;
  template: string;
  responses: Map<number, Answers>;
}

/** A response as the checker needs it. */
export interface ObservedResponse {
  method: string;
  url: string;
  status: number;
  contentType: string | null;
  /** The parsed JSON body, when the media type is JSON; undefined otherwise. */
  json?: unknown;
}

/** The operations of an OpenAPI document, compiled to check responses. */
export class ContractChecker {
  private readonly operations: Operation[] = [];

  constructor(document: Json) {
    const ajv = new Ajv2020({ strict: false, allErrors: false });
    addFormats(ajv);
    const components = ((document.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
    const resolve = (schema: Json): Json => {
      const ref = schema.$ref;
      return typeof ref === 'string' && ref.startsWith('#/components/schemas/') ? components[ref.slice('#/components/schemas/'.length)] : schema;
    };
    for (const [template, item] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
      // `{path}` is the whole trailing part of the URL; other parameters are one segment.
      const source = template.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\{(\w+)\\\}/g, (_, name: string) => (name === 'path' ? '.+' : '[^/]+'));
      const pattern = new RegExp(`^${source}$`);
      for (const [method, op] of Object.entries(item)) {
        const responses = new Map<number, Answers>();
        for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
          const answers: Answers = new Map();
          for (const [media, entry] of Object.entries((response.content ?? {}) as Record<string, Json>)) {
            answers.set(media, media === 'application/json' ? ajv.compile(resolve(entry.schema as Json)) : null);
          }
          responses.set(Number(status), answers);
        }
        this.operations.push({ pattern, method: method.toUpperCase(), template, responses });
      }
    }
  }

  /** True when the document has an operation for this method and URL. */
  covers(method: string, url: string): boolean {
    return this.find(method, url) !== undefined;
  }

  /** What is wrong with `response` by the document, or null when it matches or is not covered. */
  check(response: ObservedResponse): string | null {
    const op = this.find(response.method, response.url);
    if (op === undefined) return null;
    const where = `${response.method} ${op.template} ${response.status}`;
    const answers = op.responses.get(response.status);
    if (answers === undefined) return `${where}: the document gives this operation no ${response.status}`;
    if (answers.size === 0) return null; // no body documented (202, 204)
    const media = (response.contentType ?? '').split(';')[0].trim().toLowerCase();
    if (!answers.has(media)) return `${where}: media type ${JSON.stringify(media)} is not one of ${[...answers.keys()].join(', ')}`;
    const validate = answers.get(media);
    if (validate === null || validate === undefined || validate(response.json)) return null;
    return `${where}: body ${JSON.stringify(response.json).slice(0, 300)} does not match: ${JSON.stringify(validate.errors?.slice(0, 3))}`;
  }

  private find(method: string, url: string): Operation | undefined {
    const path = new URL(url, 'http://x').pathname;
    return this.operations.find((op) => op.method === method.toUpperCase() && op.pattern.test(path));
  }
}
