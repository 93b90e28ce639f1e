/** Conversions shared by the repositories. */

/** ISO 8601 UTC with milliseconds, the one timestamp format of the API. */
export function iso(value: Date | string): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
