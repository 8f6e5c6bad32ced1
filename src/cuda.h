/* ==== >>cuda (being written). Included twice from amk.h: once with AMK__PART_DECL defined (public
   declarations, inside extern "C"), once with AMK__PART_IMPL defined (the implementation). ==== */
#ifdef AMK__PART_DECL
#endif
#ifdef AMK__PART_IMPL
#endif
