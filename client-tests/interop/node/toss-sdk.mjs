// toss-sdk.mjs -- toss-payments-server-api (npm, MIT; a typed Toss SDK generated from its own
// OpenAPI document, swagger.json) used as a test client against fakegate (docs/interop.md,
// "The Toss SDK"). Its approve goes through Toss's older approve path, POST
// /v1/payments/{paymentKey} (docs/api.md §2.1); its at, cancel and virtual_accounts.create
// through the current routes. Each case is judged by fakegate's ledger and journal, and every
// answer is validated against the SDK's published schema with ajv: a schema error is either
// one of the documented differences below (fields the SDK models from an older Toss API
// version) or a failure, and a documented difference that no answer shows any more fails too,
// so the list in docs/interop.md cannot go stale.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { start } from "../../../clients/node/fakegate.mjs";
import { load, versionOf } from "./harness.mjs";

const NAME = "toss-payments-server-api";
const toss = (await load(NAME)).default;
const Ajv2020 = (await load("ajv/dist/2020.js")).default;
const addFormats = (await load("ajv-formats")).default;
const version = versionOf(NAME);
const swagger = JSON.parse(readFileSync(join(process.env.INTEROP_NODE_DIR, "node_modules", NAME, "swagger.json"), "utf8"));

// What the SDK's schema asks for that fakegate, speaking Toss's version 2022-11-16
// (docs/api.md §2.3), sends otherwise. Key: "<schema path> <ajv keyword> <property>"; value:
// what fakegate sends instead. docs/interop.md lists the same, with the sources.
const DOCUMENTED = {
  "/ required transactionKey": "lastTransactionKey",
  "/card required company": "card.issuerCode and card.acquirerCode (codes, not names)",
  "/card required receiptUrl": "receipt.url",
  "/card/number pattern": "a masked number, 4330****…",
  "/cancels/* required taxAmount": "no taxAmount (taxFreeAmount and taxExemptionAmount)",
  "/virtualAccount required bank": "virtualAccount.bankCode",
  "/virtualAccount/dueDate format": "a date-time with its +09:00 offset, not a bare date",
};

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv); // date-time, date, uri: requestedAt, canceledAt, dueDate are checked too
ajv.addSchema(swagger, "swagger");
const schema = (name) => ajv.getSchema(`swagger#/components/schemas/${name.replace(/\//g, "~1")}`);
const cardSchema = schema("ITossCardPayment");
const vaSchema = schema("ITossVirtualAccountPayment");
if (!cardSchema || !vaSchema) throw new Error("the SDK's swagger.json lacks ITossCardPayment or ITossVirtualAccountPayment");

const seen = new Set();
let passed = 0, failed = 0;

/** The schema errors of `value`, split into documented and not. */
function validate(validator, value) {
  validator(value);
  const documented = [], other = [];
  for (const e of validator.errors ?? []) {
    // oneOf/anyOf/if report their branches' failures too: only the leaves name a field.
    if (["oneOf", "anyOf", "if", "type"].includes(e.keyword) && /\/(cancels|card|virtualAccount)$/.test(e.instancePath)) continue;
    const path = (e.instancePath || "/").replace(/\/\d+(?=\/|$)/g, "/*");
    const key = e.keyword === "required" ? `${path} required ${e.params.missingProperty}` : `${path} ${e.keyword}`;
    if (key in DOCUMENTED) { documented.push(key); seen.add(key); } else other.push(`${key} (${e.message})`);
  }
  return { documented: [...new Set(documented)], other: [...new Set(other)] };
}

function report(name, problems, text) {
  if (problems.length) { failed++; console.log(`FAIL ${NAME} ${version} | sdk | ${name} | ${problems.join("; ")}`); }
  else { passed++; console.log(`ok   ${NAME} ${version} | sdk | ${name} | ${text}`); }
}

/** One case: run(), then its answers validated and its problems reported. */
async function kase(name, run) {
  let out;
  try { out = await run(); } catch (e) { report(name, [`threw ${e?.constructor?.name}: ${e?.message}`], ""); return; }
  const problems = [...out.problems];
  const shown = [];
  for (const [what, validator, value] of out.answers) {
    const v = validate(validator, value);
    for (const o of v.other) problems.push(`${what}: ${o}`);
    if (v.documented.length) shown.push(`${what}: ${v.documented.length} documented difference${v.documented.length > 1 ? "s" : ""}`);
  }
  report(name, problems, [out.text, ...shown].join("; "));
}

const gate = await start({ bin: process.env.FAKEGATE_BIN, args: ["--consecutive-cancel-ms", "0"] });
try {
  const t = gate.tenant("test_sk_tosssdk");
  await t.reset({ name: "instant", routes: { default: { latency: { dist: "fixed", ms: 0 } } } });
  const conn = (headers = {}) => ({ host: t.url, headers: { ...t.headers, ...headers } });
  const stamp = Date.now();

  await kase("payments.approve (POST /v1/payments/{paymentKey}), resent under its Idempotency-Key", async () => {
    const pk = `pk_sdk_approve_${stamp}`, orderId = `order-sdk-approve-${stamp}`;
    const c = conn({ "Idempotency-Key": `sdk-approve-${stamp}` });
    const first = await toss.functional.v1.payments.approve(c, pk, { orderId, amount: 15000 });
    const again = await toss.functional.v1.payments.approve(c, pk, { orderId, amount: 15000 });
    const entry = await t.payment(orderId);
    const journal = await t.requests({ orderId });
    const problems = [];
    if (first.status !== "DONE" || first.paymentKey !== pk) problems.push(`approve answered ${first.status} ${first.paymentKey}`);
    if (JSON.stringify(again) !== JSON.stringify(first)) problems.push("the resend's answer differs from the first");
    if (entry?.charges !== 1) problems.push(`charges ${entry?.charges}, expected 1`);
    if (journal.length !== 2 || journal.some((r) => r.route !== "confirm" || r.path !== `/v1/payments/${pk}`))
      problems.push(`journal ${JSON.stringify(journal.map((r) => [r.path, r.route, r.outcome]))}`);
    else if (journal[1].outcome !== "replayed") problems.push(`the resend was ${journal[1].outcome}, expected replayed`);
    return { problems, answers: [["approve", cardSchema, first]], text: `DONE, charged 1, resend replayed, journal route confirm` };
  });

  await kase("payments.at, then payments.cancel partial and full (after a confirm on /v1/payments/confirm)", async () => {
    const pk = `pk_sdk_cancel_${stamp}`, orderId = `order-sdk-cancel-${stamp}`;
    const res = await fetch(`${t.url}/v1/payments/confirm`, { method: "POST",
      headers: { ...t.headers, "Content-Type": "application/json" }, body: JSON.stringify({ paymentKey: pk, orderId, amount: 20000 }) });
    const problems = [];
    if (res.status !== 200) problems.push(`confirm answered ${res.status}`);
    const read = await toss.functional.v1.payments.at(conn(), pk);
    const partial = await toss.functional.v1.payments.cancel(conn({ "Idempotency-Key": `sdk-cancel-1-${stamp}` }), pk,
      { paymentKey: pk, cancelReason: "부분 취소", cancelAmount: 5000 });
    const full = await toss.functional.v1.payments.cancel(conn({ "Idempotency-Key": `sdk-cancel-2-${stamp}` }), pk,
      { paymentKey: pk, cancelReason: "전액 취소" });
    const entry = await t.payment(orderId);
    if (read.status !== "DONE") problems.push(`at answered ${read.status}`);
    if (partial.status !== "PARTIAL_CANCELED" || partial.balanceAmount !== 15000) problems.push(`partial cancel: ${partial.status} ${partial.balanceAmount}`);
    if (full.status !== "CANCELED" || full.balanceAmount !== 0) problems.push(`full cancel: ${full.status} ${full.balanceAmount}`);
    if (entry?.charges !== 1 || entry?.payment?.cancels?.length !== 2) problems.push(`ledger: charges ${entry?.charges}, ${entry?.payment?.cancels?.length} cancels`);
    return { problems, answers: [["at", cardSchema, read], ["cancel", cardSchema, partial], ["cancel", cardSchema, full]],
      text: `DONE, PARTIAL_CANCELED 15000, CANCELED 0; ledger: charged 1, 2 cancels` };
  });

  await kase("virtual_accounts.create", async () => {
    const orderId = `order-sdk-va-${stamp}`;
    const va = await toss.functional.v1.virtual_accounts.create(conn({ "Idempotency-Key": `sdk-va-${stamp}` }),
      { method: "virtual-account", orderId, orderName: "SDK 가상계좌", bank: "신한", customerName: "홍길동", amount: 30000 });
    const entry = await t.payment(orderId);
    const problems = [];
    if (va.status !== "WAITING_FOR_DEPOSIT" || !va.virtualAccount?.accountNumber) problems.push(`create answered ${va.status}`);
    if (entry?.payment?.status !== "WAITING_FOR_DEPOSIT" || entry?.charges !== 0) problems.push(`ledger: ${entry?.payment?.status}, charges ${entry?.charges}`);
    return { problems, answers: [["virtual_accounts.create", vaSchema, va]],
      text: `WAITING_FOR_DEPOSIT at bank ${va.virtualAccount?.bankCode}, charged 0` };
  });

  for (const key of Object.keys(DOCUMENTED)) {
    if (!seen.has(key)) { failed++; console.log(`FAIL ${NAME} ${version} | schema | ${key} | documented in docs/interop.md but no answer shows it: drop it from the list`); }
    else { passed++; console.log(`ok   ${NAME} ${version} | schema | ${key} | fakegate sends ${DOCUMENTED[key]} (Toss 2022-11-16)`); }
  }
} finally {
  await gate.stop();
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
