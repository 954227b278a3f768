/** Worker thread sources, imported as text (`with { type: "text" }`) and started from a Blob. */
declare module "*.worker.js" {
  const source: string;
  export default source;
}
