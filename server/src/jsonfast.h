/* jsonfast.h -- the request bodies clients actually send ({"paymentKey":"...","orderId":"...",
 * "amount":15000}), parsed in one pass without jansson's lexer, into the same jansson tree
 * json_loadb would build. Only a plain subset is taken: objects, arrays, strings of printable
 * ASCII without escapes, integers of at most 18 digits, true, false, null, JSON whitespace.
 * Anything else -- an escape, a byte outside printable ASCII in a string, a fraction or
 * exponent, a longer integer, a duplicate key, any syntax error, trailing bytes, a top level
 * that is not an object, nesting deeper than asked -- is declined, and the caller parses with
 * jansson, whose answer (a tree or a located error) then stands: declining never changes what a
 * request gets. No I/O; allocates only the tree. */
#ifndef FAKEGATE_JSONFAST_H
#define FAKEGATE_JSONFAST_H

#include <jansson.h>
#include <stddef.h>

/* Parse `text` (`len` bytes, no NUL needed) when it is a top-level object in the subset above
 * nested at most `max_depth` containers deep (the top-level object is level 1; at most 64 is
 * taken whatever max_depth says). Returns a new reference to the object -- the tree
 * json_loadb(text, len, JSON_REJECT_DUPLICATES, ...) returns, key order included -- or NULL
 * when declined (or out of memory): then parse with jansson. Thread: any; pure. */
json_t *jsonfast_parse(const char *text, size_t len, size_t max_depth);

#endif
