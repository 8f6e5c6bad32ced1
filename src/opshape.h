/* ==== >>impl_opshape (stub: being written) ==== */
/* Checks that task t's buffers (shapes, dtypes) and param values fit its opcode. Precondition:
   every buffer id of t exists, the opcode is defined, the arity and the param types are right.
   Returns 1 if fine; else 0 with *which (OP_SHAPE, OP_DTYPE, PARAM_VALUE or OP_UNSUPPORTED) and a
   message. Shared by validate and the reference VM: one place defines what each op accepts. */
AMK__FN int amk__op_check(const amk_program *p, const amk_task *t, amk_check *which, char *msg,
                          size_t msg_size) {
    AMK__UNUSED(p); AMK__UNUSED(t); AMK__UNUSED(which); AMK__UNUSED(msg); AMK__UNUSED(msg_size);
    return 1;
}
