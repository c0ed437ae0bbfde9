// Placeholder: replaced by the server-starting global setup (MongoDB stand-in, Temporal dev server).
export default function setup(): void {}
