/* The one translation unit that holds the library's implementation for the host tests. */
#define AMK_IMPLEMENTATION
#include "../amk.h"
