// The component's imports, for running the SDK natively in test_sdk.py: the
// helpers under test never call them.
const absent = () => {
  throw new Error('not in a component');
};
export const log = absent;
export const write = absent;
export const tables = absent;
