# Doxygen input filter for lockstep's public headers (docs/doxygen/Doxyfile.in: FILTER_PATTERNS).
#
# The headers document their API in plain // comments, which doxygen ignores. This filter turns
# them into doxygen comments on the fly, without changing the headers:
#   - the comment block at the top of a file becomes the file's description (@file);
#   - a comment block directly above a declaration (no blank line between) becomes its
#     documentation (///);
#   - a comment at the end of a member's line (after ';' or ',') becomes that member's (///<);
#   - banners (// ----), blocks followed by a blank line or a preprocessor line, comments inside
#     function bodies and NOLINT markers stay plain comments.
# In the converted text, lines indented by two or more extra spaces that are not list items are
# code (@code ... @endcode), and outside code and `code spans` the characters doxygen would read
# as markup (< > @ \) are escaped, so that the comments read as prose and make no warnings.
# Plain POSIX awk (Debian's mawk or gawk): one pass, one block of lookahead.

function escape_prose(text,    out, n, i, c, quoted, spanned) {
  # Doxygen reads `code spans` and "quoted text" literally: escape only outside them.
  out = ""
  quoted = 0
  spanned = 0
  n = length(text)
  for (i = 1; i <= n; i++) {
    c = substr(text, i, 1)
    if (c == "`" && !quoted) spanned = !spanned
    else if (c == "\"" && !spanned) quoted = !quoted
    else if (!quoted && !spanned) {
      if (c == "\\" || c == "@" || c == "<") c = "\\" c
      else if (c == ">") c = (substr(text, i + 1, 2) == "::") ? "\\>\\" : "\\>"
    }
    out = out c
  }
  return out
}

# The text of a full-line comment, without its indentation and "//" (and one space after it).
function comment_text(line) {
  sub(/^[ \t]*\/\/ ?/, "", line)
  return line
}

function is_list_item(text) {
  return text ~ /^ *(- |[0-9]+\. )/
}

# Writes the buffered block as doxygen comment lines with the given indentation and prefix.
function flush_doc(indent, as_file,    i, text, in_code, in_list, stripped) {
  if (as_file) print indent "/// @file"
  in_code = 0
  in_list = 0
  for (i = 1; i <= nblock; i++) {
    text = comment_text(block[i])
    stripped = text
    sub(/^ +/, "", stripped)
    if (text ~ /^  / && !is_list_item(text) && !in_list) {
      if (!in_code) print indent "/// @code"
      in_code = 1
      print indent "/// " text
      continue
    }
    if (in_code) print indent "/// @endcode"
    in_code = 0
    if (is_list_item(text)) in_list = 1
    else if (text !~ /^  / ) in_list = 0
    print indent "/// " escape_prose(text)
  }
  if (in_code) print indent "/// @endcode"
  nblock = 0
}

function flush_plain(    i) {
  for (i = 1; i <= nblock; i++) print block[i]
  nblock = 0
}

# A code line with a trailing comment: "int x = 0;  // meaning" -> "int x = 0;  ///< meaning".
function trailing(line,    code, text, at) {
  at = index(line, "//")
  if (at == 0 || line ~ /"[^"]*\/\/[^"]*"/) return line
  code = substr(line, 1, at - 1)
  text = substr(line, at + 2)
  sub(/^ /, "", text)
  if (text ~ /^NOLINT/) return code
  if (depth_in_body > 0 || code !~ /[;,][ \t]*$/) return line
  return code "///< " escape_prose(text)
}

BEGIN { nblock = 0; seen_code = 0; banner = 0; depth_in_body = 0 }

/^[ \t]*\/\/[^\/]/ || /^[ \t]*\/\/$/ {
  block[++nblock] = $0
  if ($0 ~ /^[ \t]*\/\/ ?-----/) banner = 1
  next
}

{
  line = $0
  if (nblock > 0) {
    match(block[1], /^[ \t]*/)
    indent = substr(block[1], 1, RLENGTH)
    if (banner) flush_plain()
    else if (!seen_code) flush_doc(indent, 1)
    else if (line ~ /^[ \t]*$/ || line ~ /^[ \t]*#/ || depth_in_body > 0) flush_plain()
    else flush_doc(indent, 0)
    banner = 0
  }
  if (line !~ /^[ \t]*$/) seen_code = 1
  print trailing(line)
  # Function bodies: a line that opens a brace after a ')' (a function definition) starts one;
  # braces inside it are counted until it closes. Class, struct, enum and namespace braces do
  # not count.
  if (depth_in_body > 0) {
    depth_in_body += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
    if (depth_in_body < 0) depth_in_body = 0
  } else if (line ~ /\)[^;]*\{[^}]*$/ && line !~ /^[ \t]*(namespace|class|struct|enum|union)/) {
    depth_in_body = gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
  }
}

END {
  if (nblock > 0) flush_plain()
}
