// Preload (node --require) that makes every TCP listen() without an explicit host bind
// 127.0.0.1 instead of all interfaces. `@modelcontextprotocol/server-everything` calls
// `app.listen(PORT)` and honours no HOST variable: this keeps it on the loopback interface.
"use strict";
const net = require("node:net");

const original = net.Server.prototype.listen;
net.Server.prototype.listen = function listen(...args) {
  const first = args[0];
  if (typeof first === "number" || (typeof first === "string" && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, cb]): insert the host when it was left out.
    if (typeof args[1] !== "string") {
      args.splice(1, 0, "127.0.0.1");
    }
  } else if (first && typeof first === "object" && !Array.isArray(first) && first.port !== undefined) {
    if (first.host === undefined && first.path === undefined) {
      args[0] = { ...first, host: "127.0.0.1" };
    }
  }
  return original.apply(this, args);
};
