/* libFuzzer harness for the device image set (amk_image_set_find): for each kind, a found image
   must lie inside the input; any other result must leave the outputs empty. Any abort() is a
   finding. Seeds: fuzz/seeds-fuzz_image_set (a set of two small images). */
#define AMK_IMPLEMENTATION
#include "../amk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int k;
    for (k = 0; k < 3; k++) {
        const void *img = NULL;
        size_t n = 0;
        const amk_result r = amk_image_set_find(data, size, (amk_image_kind)k, &img, &n, NULL);
        if (r == AMK_OK) {
            const uint8_t *b = (const uint8_t *)img;
            if (!b || n == 0 || b < data || n > size || b > data + (size - n)) abort();
            volatile uint8_t ends = (uint8_t)(b[0] ^ b[n - 1]); /* reads both ends under ASan */
            (void)ends;
        } else if (img || n) {
            abort();
        }
    }
    return 0;
}
