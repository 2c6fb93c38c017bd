// Forms generated from a JSON Schema (a workflow's `resumeSchema`): one input per property,
// labelled with the property's name exactly; a checkbox for a boolean, a number field with its
// bounds for a number or integer, a select for an enum, a JSON text area for objects and arrays,
// a text field otherwise. Values are checked in the browser with the schema's rules (native
// constraint validation, plus the rules HTML has no attribute for, as custom validity) before
// anything is sent; the server's refusal is shown beside the form.

import { h } from "./dom.js";

let formCount = 0;

/** The first non-null type of a property schema (`["string", "null"]` is a string). */
function typeOf(schema) {
  const t = schema.type;
  if (Array.isArray(t)) return t.find((x) => x !== "null") || "null";
  if (t) return t;
  if (schema.enum) return "enum";
  if (schema.properties) return "object";
  return "any";
}

/** The schema's rule a value breaks, as a sentence, or null. */
export function check(schema, value) {
  if (value === undefined) return null;
  const type = typeOf(schema);
  if (schema.enum && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
    return `Must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}.`;
  }
  if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) {
    return `Must be ${JSON.stringify(schema.const)}.`;
  }
  if (type === "integer" || type === "number") {
    if (typeof value !== "number" || !Number.isFinite(value)) return "Must be a number.";
    if (type === "integer" && !Number.isInteger(value)) return "Must be a whole number.";
    if (typeof schema.minimum === "number" && value < schema.minimum) return `Must be at least ${schema.minimum}.`;
    if (typeof schema.maximum === "number" && value > schema.maximum) return `Must be at most ${schema.maximum}.`;
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) {
      return `Must be more than ${schema.exclusiveMinimum}.`;
    }
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) {
      return `Must be less than ${schema.exclusiveMaximum}.`;
    }
    if (typeof schema.multipleOf === "number" && schema.multipleOf > 0) {
      const q = value / schema.multipleOf;
      if (Math.abs(q - Math.round(q)) > 1e-9) return `Must be a multiple of ${schema.multipleOf}.`;
    }
  } else if (type === "string") {
    if (typeof value !== "string") return "Must be text.";
    const length = [...value].length;
    if (typeof schema.minLength === "number" && length < schema.minLength) {
      return `Must be at least ${schema.minLength} characters.`;
    }
    if (typeof schema.maxLength === "number" && length > schema.maxLength) {
      return `Must be at most ${schema.maxLength} characters.`;
    }
    if (typeof schema.pattern === "string") {
      let re = null;
      try {
        re = new RegExp(schema.pattern, "u");
      } catch {
        // A pattern this browser cannot read: the server checks it.
      }
      if (re && !re.test(value)) return `Must match the pattern ${schema.pattern}.`;
    }
  } else if (type === "boolean") {
    if (typeof value !== "boolean") return "Must be true or false.";
  } else if (type === "object") {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return "Must be a JSON object.";
    for (const key of schema.required || []) {
      if (!(key in value)) return `Must have the property ${key}.`;
    }
  } else if (type === "array") {
    if (!Array.isArray(value)) return "Must be a JSON array.";
    if (typeof schema.minItems === "number" && value.length < schema.minItems) {
      return `Must have at least ${schema.minItems} items.`;
    }
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) {
      return `Must have at most ${schema.maxItems} items.`;
    }
  }
  return null;
}

/** A short description of a property's rules, shown under its input. */
function rulesText(schema, required) {
  const type = typeOf(schema);
  const parts = [type === "enum" ? "one of the list" : type === "any" ? "JSON" : type];
  if (required) parts.push("required");
  if (typeof schema.minimum === "number") parts.push(`≥ ${schema.minimum}`);
  if (typeof schema.exclusiveMinimum === "number") parts.push(`> ${schema.exclusiveMinimum}`);
  if (typeof schema.maximum === "number") parts.push(`≤ ${schema.maximum}`);
  if (typeof schema.exclusiveMaximum === "number") parts.push(`< ${schema.exclusiveMaximum}`);
  if (typeof schema.minLength === "number") parts.push(`at least ${schema.minLength} characters`);
  if (typeof schema.maxLength === "number") parts.push(`at most ${schema.maxLength} characters`);
  if (typeof schema.pattern === "string") parts.push(`pattern ${schema.pattern}`);
  const text = parts.join(" · ");
  return schema.description ? `${schema.description} (${text})` : text;
}

/**
 * One input for one property: `{row, read()}`, where `read()` gives the value to send
 * (`undefined` to leave the property out) and sets the input's custom validity.
 */
function field(name, schema, required, idPrefix) {
  const id = `${idPrefix}-${name}`;
  const hintId = `${id}-hint`;
  const type = typeOf(schema);
  const label = h("label", { for: id }, name);
  const hint = h("span", { class: "hint", id: hintId }, rulesText(schema, required));
  let input;
  let parse;

  if (schema.enum) {
    const hasDefault = "default" in schema;
    input = h("select", { id, name, required: required && !hasDefault, "aria-describedby": hintId });
    if (!required || !hasDefault) {
      input.append(h("option", { value: "" }, required ? "Choose…" : "(not set)"));
    }
    schema.enum.forEach((v, i) => {
      const opt = h("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v));
      if (hasDefault && JSON.stringify(v) === JSON.stringify(schema.default)) opt.selected = true;
      input.append(opt);
    });
    parse = () => (input.value === "" ? undefined : schema.enum[Number(input.value)]);
  } else if (type === "boolean") {
    // A checkbox always has a value: a required boolean is sent as true or false (HTML's
    // `required` on a checkbox would mean "must be checked", which is not the schema's rule).
    input = h("input", { id, name, type: "checkbox", "aria-describedby": hintId });
    input.checked = schema.default === true;
    parse = () => input.checked;
    return {
      row: h("div", { class: "field checkbox" }, input, label, hint),
      read: () => parse(),
      input,
    };
  } else if (type === "number" || type === "integer") {
    input = h("input", {
      id,
      name,
      type: "number",
      inputmode: type === "integer" ? "numeric" : "decimal",
      step: type === "integer" ? "1" : "any",
      min: typeof schema.minimum === "number" ? schema.minimum : null,
      max: typeof schema.maximum === "number" ? schema.maximum : null,
      required,
      "aria-describedby": hintId,
    });
    if (typeof schema.default === "number") input.value = String(schema.default);
    parse = () => (input.value.trim() === "" ? undefined : Number(input.value));
  } else if (type === "string") {
    const inputType = schema.format === "email" ? "email" : schema.format === "uri" ? "url" : "text";
    input = h("input", {
      id,
      name,
      type: inputType,
      minlength: typeof schema.minLength === "number" ? schema.minLength : null,
      maxlength: typeof schema.maxLength === "number" ? schema.maxLength : null,
      required: required && schema.minLength !== 0,
      autocomplete: "off",
      "aria-describedby": hintId,
    });
    if (typeof schema.default === "string") input.value = schema.default;
    // An empty optional text is left out; a required one may be empty only if the schema allows.
    parse = () => (input.value === "" && !required ? undefined : input.value);
  } else {
    // Objects, arrays, anything else: JSON text.
    input = h("textarea", { id, name, rows: 3, required, spellcheck: "false", "aria-describedby": hintId });
    if ("default" in schema) input.value = JSON.stringify(schema.default);
    parse = () => {
      if (input.value.trim() === "") return undefined;
      try {
        return JSON.parse(input.value);
      } catch {
        throw new SyntaxError("Must be valid JSON.");
      }
    };
  }

  const read = () => {
    let value;
    let message = "";
    try {
      value = parse();
      message = check(schema, value) || "";
    } catch (e) {
      message = e.message;
    }
    input.setCustomValidity(message);
    return value;
  };
  input.addEventListener("input", read);
  input.addEventListener("change", read);
  return { row: h("div", { class: "field" }, label, input, hint), read, input };
}

/**
 * A form for a value of `schema` (an object schema; `null` gives a free JSON field).
 * `onSubmit(value)` sends it and resolves with anything, or throws an error whose message is
 * shown beside the form (role="alert"), the form left as it was. `submitLabel` names the button;
 * `onBusy(bool)` is told when a submission starts and ends.
 * Returns `{form, setDisabled(bool), reset()}`.
 */
export function schemaForm(schema, { onSubmit, submitLabel = "Submit", label, onBusy = () => {} }) {
  const idPrefix = `f${++formCount}`;
  const fields = [];
  const properties = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const free = !schema || (schema.type && schema.type !== "object") || !schema.properties;
  let freeField = null;

  if (free) {
    freeField = field("resumeData", schema && schema.type ? schema : {}, false, idPrefix);
  } else {
    for (const [name, prop] of Object.entries(properties)) {
      fields.push([name, field(name, prop || {}, required.has(name), idPrefix)]);
    }
  }

  const alert = h("p", { class: "alert", role: "alert" });
  const button = h("button", { type: "submit", class: "primary" }, submitLabel);
  const form = h(
    "form",
    { class: "schema-form", "aria-label": label || submitLabel },
    freeField ? freeField.row : fields.map(([, f]) => f.row),
    h("div", { class: "form-actions" }, button),
    alert,
  );

  // Mark the controls the browser found invalid on a submit attempt.
  form.addEventListener(
    "invalid",
    (event) => event.target.setAttribute("aria-invalid", "true"),
    true,
  );
  form.addEventListener("input", (event) => {
    if (event.target.checkValidity?.()) event.target.removeAttribute("aria-invalid");
  });

  let locked = false;
  const collect = () => {
    if (freeField) return freeField.read();
    const value = {};
    for (const [name, f] of fields) {
      const v = f.read();
      if (v !== undefined) value[name] = v;
    }
    return value;
  };

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const value = collect();
    // Custom validity was just set by `collect`: let the browser report the first problem.
    if (!form.reportValidity()) return;
    if (schema && !free) {
      const missing = [...required].filter((k) => !(k in value));
      if (missing.length) {
        alert.textContent = `Missing: ${missing.join(", ")}`;
        return;
      }
    }
    alert.textContent = "";
    button.disabled = true;
    onBusy(true);
    try {
      await onSubmit(value);
    } catch (e) {
      if (e.name !== "AbortError") alert.textContent = e.message || String(e);
    } finally {
      button.disabled = locked;
      onBusy(false);
    }
  });

  return {
    form,
    setDisabled(disabled) {
      locked = disabled;
      for (const el of form.elements) el.disabled = disabled;
    },
  };
}
