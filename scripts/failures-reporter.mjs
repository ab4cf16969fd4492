// A node:test reporter that writes one JSON line per failed test or suite: its name, its file and its depth.
// scripts/test.mjs reads it to run the failed files again alone and to name them at the end of the run.
export default async function* failures(source) {
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const { name, file, nesting, details } = event.data;
    const error = details?.error;
    const cause = error?.cause ?? error;
    const message = String(cause?.message ?? cause ?? '')
      .split('\n', 1)[0]
      .slice(0, 300);
    yield `${JSON.stringify({ name, file, nesting, suite: details?.type === 'suite', message })}\n`;
  }
}
