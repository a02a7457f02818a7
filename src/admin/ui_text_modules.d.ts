/**
 * Types of the web UI's files imported as text (`with { type: "text" }`, see ui_assets.ts): Bun
 * inlines them as strings, in `bun test` and in the compiled binary alike. One pattern per
 * script, so no other `.js` import in the project is typed as a string by accident.
 */
declare module "*/ui/style.css" {
  const text: string;
  export default text;
}
declare module "*/ui/app.js" {
  const text: string;
  export default text;
}
declare module "*/ui/api.js" {
  const text: string;
  export default text;
}
declare module "*/ui/format.js" {
  const text: string;
  export default text;
}
declare module "*/ui/overview.js" {
  const text: string;
  export default text;
}
declare module "*/ui/topics.js" {
  const text: string;
  export default text;
}
declare module "*/ui/split.js" {
  const text: string;
  export default text;
}
declare module "*/ui/icicle.js" {
  const text: string;
  export default text;
}
