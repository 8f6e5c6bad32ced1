/* amk - the command-line tool (stub while the host core is being written). */
#define AMK_IMPLEMENTATION
#include "../amk.h"
#include <stdio.h>
int main(int argc, char **argv) { (void)argc; (void)argv; printf("amk %s\n", AMK_VERSION_STRING); return 0; }
