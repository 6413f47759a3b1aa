/* Looks like a CPython 3.12 to looptrace's interpreter check (the symbols
 * it reads, a version it has no layout of): the version check's test. */
const unsigned long Py_Version = 0x030c00f0;
char _PyRuntime[256] = {1};
char PyCode_Type[256] = {1};

int main(void) { return _PyRuntime[0] - 1; }
