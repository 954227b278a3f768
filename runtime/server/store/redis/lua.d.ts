declare module "*.lua" {
  const text: string;
  export default text;
}
