// Validates Serverless Workflow DSL documents with the official SDK (@serverlessworkflow/sdk):
// `Classes.Workflow.deserialize` reads YAML or JSON (js-yaml, the SDK's own dependency), checks
// that `document.dsl` is the SDK's DSL version, and validates the document against the
// specification's JSON Schema (ajv, with formats). Used by
// crates/agentry-definitions/tests/shape_against_sdk.rs.
//
// Usage: node dsl-validate.mjs FILE...
// Prints one JSON line per file: {"file": FILE, "valid": true|false, "errors": [STRING...]}.
import { readFileSync } from 'node:fs';
import { Classes } from '@serverlessworkflow/sdk';

/// The validator's errors, one per line of its message ("- /path | schemaPath | message | ...").
function errorsOf(error) {
  const message = String(error?.message ?? error);
  const listed = message
    .split('\n')
    .filter((line) => line.startsWith('- '))
    .map((line) => line.slice(2));
  return listed.length > 0 ? listed : [message.split('\n')[0]];
}

for (const file of process.argv.slice(2)) {
  let valid = false;
  let errors = [];
  try {
    Classes.Workflow.deserialize(readFileSync(file, 'utf8'));
    valid = true;
  } catch (error) {
    errors = errorsOf(error);
  }
  console.log(JSON.stringify({ file, valid, errors }));
}
