/* Batchscope player: the payload, read as soon as the page holds it (a script before plotly.js's), so that its
 * inflating overlaps plotly.js's loading; the player awaits BS.payloadRead when the page is parsed (player.js). */
"use strict";
window.BS = window.BS || {};

/* The payload: the JSON in #bs-payload, over the gzip-compressed JSON (base64) in #bs-payload-gz when the page has
 * one (the app's frames: batchscope.player.export.render(..., packed=...), a tenth of the bytes to send and parse). */
BS.readPayload = async () => {
  const own = JSON.parse(document.getElementById("bs-payload").textContent);
  const el = document.getElementById("bs-payload-gz");
  if (!el) return own;
  const gz = el.textContent.trim();
  const packed = await fetch(`data:application/octet-stream;base64,${gz}`); // the browser's own base64 decoder
  const text = await new Response(packed.body.pipeThrough(new DecompressionStream("gzip"))).text();
  return Object.assign(JSON.parse(text), own);
};

BS.payloadRead = BS.readPayload();
