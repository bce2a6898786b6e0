//===- Hjson.cpp - reading Hjson as DeepSpeed does ------------------------===//
//
// Follows the decoder of hjson-py 3.1.0 (hjson/decoder.py) step for step,
// one function for each of its own, because DeepSpeed configs are whatever
// that decoder accepts, quirks included: a value that does not read as
// a number or literal runs to the end of its line, commas and comments
// included; a member needs no separator after a quoted or bracketed value; a
// root that does not parse as an object without braces is tried again as one
// value; a ''' string on the first line takes its indent from the text's last
// line. It works on the text as DeepSpeed's open(path, "r") hands it over:
// decoded from UTF-8, newlines translated, indexed by character. Where
// hjson-py fails with an exception other than its HjsonDecodeError (an
// IndexError, an OverflowError, a RecursionError, the duplicate-key
// ValueError), the failure is not retryable, since such exceptions escape
// that second try at the root. Where the result cannot be an nlohmann::json
// value (an unpaired surrogate, an integer beyond a double), the reader
// refuses instead.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Hjson.h"

#include "runtime/Error.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace ztc::rt {

namespace {

using nlohmann::json;

/// What Python's `s[i:i + 1]` is past the end of the text, the empty
/// string: a value no decoded character has.
constexpr char32_t kEnd = 0x110000;

/// Objects and arrays nested deeper than this are refused. hjson-py's
/// recursion runs out near 490 levels; the limit keeps the reader's own
/// recursion far from the end of a thread's stack.
constexpr unsigned kMaxDepth = 512;

constexpr size_t kNone = static_cast<size_t>(-1);

/// Python's str.isspace(), which str.strip() and int() go by.
bool isPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
         c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f ||
         c == 0x3000;
}

/// hjson's own whitespace (decoder.WHITESPACE), narrower than Python's.
bool isHjsonSpace(char32_t c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool isPunctuator(char32_t c) {
  return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':';
}

bool isDigit(char32_t c) { return c >= '0' && c <= '9'; }

void appendUtf8(std::string &out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

/// The text as Python's open(path, "r") hands it to hjson: decoded from
/// UTF-8, refusing what Python's codec refuses (overlong forms, encoded
/// surrogates, beyond U+10FFFF), with "\r\n" and a lone "\r" read as "\n".
/// Returns the offset of the first byte that is not UTF-8, or kNone; `out`
/// holds the characters before it.
size_t decodeText(const std::string &bytes, std::u32string &out) {
  out.reserve(bytes.size());
  size_t i = 0, size = bytes.size();
  auto byte = [&](size_t k) {
    return k < size ? static_cast<unsigned char>(bytes[k]) : 0u;
  };
  auto continuation = [](unsigned b) { return (b & 0xc0) == 0x80; };
  while (i < size) {
    unsigned b0 = byte(i);
    if (b0 < 0x80) {
      if (b0 == '\r') {
        out += U'\n';
        i += byte(i + 1) == '\n' ? 2 : 1;
      } else {
        out += static_cast<char32_t>(b0);
        ++i;
      }
      continue;
    }
    unsigned b1 = byte(i + 1), b2 = byte(i + 2), b3 = byte(i + 3);
    if (b0 >= 0xc2 && b0 <= 0xdf && continuation(b1)) {
      out += static_cast<char32_t>(((b0 & 0x1f) << 6) | (b1 & 0x3f));
      i += 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef && continuation(b1) &&
               continuation(b2) && !(b0 == 0xe0 && b1 < 0xa0) &&
               !(b0 == 0xed && b1 >= 0xa0)) {
      out += static_cast<char32_t>(((b0 & 0x0f) << 12) | ((b1 & 0x3f) << 6) |
                                   (b2 & 0x3f));
      i += 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4 && continuation(b1) &&
               continuation(b2) && continuation(b3) &&
               !(b0 == 0xf0 && b1 < 0x90) && !(b0 == 0xf4 && b1 >= 0x90)) {
      out += static_cast<char32_t>(((b0 & 0x07) << 18) | ((b1 & 0x3f) << 12) |
                                   ((b2 & 0x3f) << 6) | (b3 & 0x3f));
      i += 4;
    } else {
      return i;
    }
  }
  return kNone;
}

/// Python's int(text, 16) on the four characters after "\u", which is how
/// hjson-py reads them: surrounding whitespace, a sign, a 0x prefix and
/// single underscores between digits all pass. Empty when Python raises.
std::optional<long> pythonHex(const char32_t *text) {
  // int() skips ASCII whitespace and whitespace beyond ASCII, but not the
  // separators \x1c-\x1f that str.isspace() also counts.
  auto space = [](char32_t c) {
    return isPythonSpace(c) && !(c >= 0x1c && c <= 0x1f);
  };
  size_t i = 0, end = 4;
  while (i < end && space(text[i]))
    ++i;
  while (end > i && space(text[end - 1]))
    --end;
  bool negative = false;
  if (i < end && (text[i] == '+' || text[i] == '-'))
    negative = text[i++] == '-';
  // After a base prefix Python allows one underscore before the digits.
  bool underscoreAllowed = false;
  if (end - i >= 2 && text[i] == '0' &&
      (text[i + 1] == 'x' || text[i + 1] == 'X')) {
    i += 2;
    underscoreAllowed = true;
  }
  long value = 0;
  bool digits = false, lastUnderscore = false;
  for (; i < end; ++i) {
    char32_t c = text[i];
    if (c == '_') {
      if (lastUnderscore || !(digits || underscoreAllowed))
        return std::nullopt;
      lastUnderscore = true;
      underscoreAllowed = false;
      continue;
    }
    int digit = isDigit(c)               ? static_cast<int>(c - '0')
                : (c >= 'a' && c <= 'f') ? static_cast<int>(c - 'a' + 10)
                : (c >= 'A' && c <= 'F') ? static_cast<int>(c - 'A' + 10)
                                         : -1;
    if (digit < 0)
      return std::nullopt;
    value = value * 16 + digit;
    digits = true;
    lastUnderscore = false;
  }
  if (!digits || lastUnderscore)
    return std::nullopt;
  return negative ? -value : value;
}

/// Why reading stopped: where, what, and whether hjson-py raised its
/// HjsonDecodeError there (after which the root is tried as one value).
struct Failure {
  size_t pos;
  std::string message;
  bool retryable;
};

/// One member of an object as read, before the duplicate check.
struct Member {
  std::string key;
  size_t pos;
  json value;
};

class Reader {
public:
  explicit Reader(const std::u32string &text) : s(text) {
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n')
        newlines.push_back(i);
  }

  /// HjsonDecoder.decode and raw_decode: the whole text.
  json document();

private:
  /// Counts nesting for the depth limit (Python's RecursionError).
  class Nesting {
  public:
    Nesting(Reader &reader, size_t pos) : depth(reader.depth) {
      if (depth == kMaxDepth)
        reader.fail(pos,
                    "arrays and objects nest deeper than " +
                        std::to_string(kMaxDepth) + " levels",
                    false);
      ++depth;
    }
    ~Nesting() { --depth; }
    Nesting(const Nesting &) = delete;
    Nesting &operator=(const Nesting &) = delete;

  private:
    unsigned &depth;
  };

  char32_t at(size_t i) const { return i < s.size() ? s[i] : kEnd; }

  [[noreturn]] void fail(size_t pos, std::string message,
                         bool retryable = true) const {
    throw Failure{pos, std::move(message), retryable};
  }

  /// A character for a message.
  std::string describe(char32_t c) const {
    if (c == kEnd)
      return "the end of the file";
    std::string text;
    appendUtf8(text, c);
    return "'" + printable(text) + "'";
  }

  std::string utf8(size_t begin, size_t end) const {
    std::string text;
    for (size_t i = begin; i < end; ++i)
      appendUtf8(text, s[i]);
    return text;
  }

  /// Python's s[begin:end].strip(), or .rstrip() when `leading` is false.
  std::string strip(size_t begin, size_t end, bool leading) const {
    while (leading && begin < end && isPythonSpace(s[begin]))
      ++begin;
    while (end > begin && isPythonSpace(s[end - 1]))
      --end;
    return utf8(begin, end);
  }

  char32_t skipSpace(size_t &pos) const;
  size_t lineEnd(size_t pos) const;
  size_t skipIndent(size_t pos, size_t count) const;
  json value(size_t &pos);
  json object(size_t &pos, bool withoutBraces);
  json array(size_t &pos);
  std::string key(size_t &pos, size_t &keyPos);
  std::string quoted(size_t &pos);
  std::string multiline(size_t &pos) const;
  json quoteless(size_t &pos);
  json number(size_t begin, size_t end);

  /// Notes the first thing hjson-py reads but a json value cannot hold. It
  /// is an error only once the document is otherwise accepted, because a
  /// later syntax error may still send the root to its second try.
  void unrepresentable(size_t pos, std::string message) {
    if (!firstUnrepresentable)
      firstUnrepresentable = Failure{pos, std::move(message), false};
  }

  const std::u32string &s;
  /// Positions of every "\n", for the indent of ''' strings.
  std::vector<size_t> newlines;
  unsigned depth = 0;
  std::optional<Failure> firstUnrepresentable;
};

/// getNext: skips whitespace and comments; returns the character reached.
char32_t Reader::skipSpace(size_t &pos) const {
  while (true) {
    char32_t ch = at(pos);
    while (isHjsonSpace(ch))
      ch = at(++pos);
    char32_t next = at(pos + 1);
    if (ch == '#' || (ch == '/' && next == '/')) {
      pos = lineEnd(pos);
    } else if (ch == '/' && next == '*') {
      // hjson-py indexes past the end of an unclosed comment: IndexError.
      size_t close = s.find(U"*/", pos + 2);
      if (close == std::u32string::npos)
        fail(pos, "the /* comment is not closed", false);
      pos = close + 2;
    } else {
      return ch;
    }
  }
}

/// getEol.
size_t Reader::lineEnd(size_t pos) const {
  while (pos < s.size() && s[pos] != '\n' && s[pos] != '\r')
    ++pos;
  return pos;
}

/// skipIndent: up to `count` spaces, tabs or "\r" (kNone: any number).
size_t Reader::skipIndent(size_t pos, size_t count) const {
  while (count != 0 && (at(pos) == ' ' || at(pos) == '\t' || at(pos) == '\r')) {
    ++pos;
    if (count != kNone)
      --count;
  }
  return pos;
}

json Reader::document() {
  size_t pos = 0;
  if (!s.empty() && s[0] == 0xfeff)
    pos = 1;
  else if (s.size() >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)
    pos = 3; // A BOM decoded as Latin-1, which hjson-py strips too.
  size_t start = pos;
  char32_t ch = skipSpace(pos);
  // Blank or only comments: an empty object, unless after a BOM.
  if (start == 0 && ch == kEnd)
    return json::object();

  json result;
  size_t end = pos;
  if (ch == '{' || ch == '[') {
    result = value(end);
  } else {
    try {
      result = object(end, /*withoutBraces=*/true);
    } catch (const Failure &failure) {
      if (!failure.retryable)
        throw;
      // Perhaps a single value: a string, a number, a literal.
      // When that fails too, or leaves text after the value (hjson-py's
      // "Extra data"), the first failure is the one that makes sense to a
      // user who wrote an object.
      end = pos;
      firstUnrepresentable.reset();
      try {
        result = value(end);
      } catch (const Failure &) {
        throw failure;
      }
      if (skipSpace(end) != kEnd)
        throw failure;
    }
  }
  ch = skipSpace(end);
  if (ch != kEnd)
    fail(end, "unexpected " + describe(ch) + " after the end of the document");
  if (firstUnrepresentable)
    throw *firstUnrepresentable;
  return result;
}

/// _scan_once: the value that starts at `pos`.
json Reader::value(size_t &pos) {
  char32_t ch = at(pos);
  if (ch == kEnd)
    fail(pos, "the file ends where a value was expected");
  if (ch == '\'' && at(pos + 1) == '\'' && at(pos + 2) == '\'')
    return multiline(pos);
  if (ch == '"' || ch == '\'') {
    ++pos;
    return quoted(pos);
  }
  if (ch == '{') {
    ++pos;
    return object(pos, /*withoutBraces=*/false);
  }
  if (ch == '[') {
    ++pos;
    return array(pos);
  }
  return quoteless(pos);
}

/// JSONObject, with DeepSpeed's object_pairs_hook: it sees the members once
/// the object is complete, so a syntax error later in the object comes
/// first, and a duplicate is a ValueError (not retryable).
json Reader::object(size_t &pos, bool withoutBraces) {
  Nesting nesting(*this, withoutBraces ? pos : pos - 1);
  std::vector<Member> members;
  char32_t ch = skipSpace(pos);
  if (!withoutBraces && ch == '}') {
    ++pos;
    return json::object();
  }
  while (true) {
    if (!withoutBraces && ch == kEnd)
      fail(pos, "the file ends inside an object (a '}' is missing, or a "
                "quoteless value took it: those run to the end of the line)");
    size_t keyPos;
    std::string name = key(pos, keyPos);
    ch = skipSpace(pos);
    if (ch != ':')
      fail(pos, "expected ':' after the key \"" + printable(name) +
                    "\", found " + describe(ch));
    ++pos;
    skipSpace(pos);
    json member = value(pos);
    members.push_back({std::move(name), keyPos, std::move(member)});
    ch = skipSpace(pos);
    if (ch == ',') {
      ++pos;
      ch = skipSpace(pos);
    }
    if (withoutBraces && ch == kEnd)
      break;
    if (!withoutBraces && ch == '}') {
      ++pos;
      break;
    }
  }
  json result = json::object();
  json::object_t &fields = result.get_ref<json::object_t &>();
  for (Member &member : members)
    if (!fields.emplace(member.key, std::move(member.value)).second)
      fail(member.pos,
           "the key \"" + printable(member.key) +
               "\" appears twice in one object (DeepSpeed refuses that too)",
           false);
  return result;
}

/// JSONArray.
json Reader::array(size_t &pos) {
  Nesting nesting(*this, pos - 1);
  json result = json::array();
  char32_t ch = skipSpace(pos);
  if (ch == ']') {
    ++pos;
    return result;
  }
  while (true) {
    if (ch == kEnd)
      fail(pos, "the file ends inside an array (a ']' is missing, or a "
                "quoteless value took it: those run to the end of the line)");
    result.push_back(value(pos));
    ch = skipSpace(pos);
    if (ch == ',') {
      ++pos;
      ch = skipSpace(pos);
    }
    if (ch == ']') {
      ++pos;
      return result;
    }
  }
}

/// scanKeyName: a quoted key, or the characters up to ':' with whitespace
/// only before the ':'. `keyPos` is where the key starts.
std::string Reader::key(size_t &pos, size_t &keyPos) {
  char32_t ch = skipSpace(pos);
  keyPos = pos;
  if (ch == '"' || ch == '\'') {
    ++pos;
    return quoted(pos);
  }
  size_t begin = pos;
  // hjson-py allows whitespace only right before the ':'. `space` follows
  // the first run of whitespace to its last character.
  size_t space = kNone, firstSpace = kNone;
  // What went wrong where a ':' was due: after a word and whitespace, the
  // ':' is missing; otherwise the key itself is wrong.
  auto noColon = [&](const std::string &otherwise) {
    if (firstSpace == kNone)
      fail(pos, otherwise);
    fail(space + 1, "expected ':' after the key \"" +
                        printable(utf8(begin, firstSpace)) + "\", found " +
                        describe(at(space + 1)));
  };
  for (;; ++pos) {
    ch = at(pos);
    if (ch == kEnd)
      noColon("the file ends where a key and its ':' were expected");
    if (ch == ':') {
      if (begin == pos)
        fail(begin,
             "':' without a key before it (an empty key is written \"\")");
      if (space == kNone)
        return utf8(begin, pos);
      if (space != pos - 1)
        fail(firstSpace, "whitespace in the key \"" +
                             printable(utf8(begin, pos)) +
                             "\" (put a key with spaces in quotes)");
      return strip(begin, pos, /*leading=*/false);
    }
    if (isHjsonSpace(ch)) {
      if (firstSpace == kNone)
        firstSpace = pos;
      if (space == kNone || space == pos - 1)
        space = pos;
    } else if (ch == '{' || ch == '}' || ch == '[' || ch == ']' || ch == ',') {
      noColon("found " + describe(ch) +
              " where a key was expected (put a key with {}[],: or spaces in "
              "quotes)");
    }
  }
}

/// scanstring: a string in double or single quotes; `pos` is just after the
/// opening quote. The other kind of quote needs no escape; "\'" is allowed
/// in both; control characters are refused (hjson's strict mode).
std::string Reader::quoted(size_t &pos) {
  size_t begin = pos - 1;
  char32_t quote = s[begin];
  std::string out;
  while (true) {
    char32_t ch = at(pos);
    if (ch == kEnd)
      fail(begin, "the string is not closed");
    if (ch == quote) {
      ++pos;
      return out;
    }
    if (ch < 0x20)
      fail(pos, "control character " + describe(ch) +
                    " in a string (write it as an escape)");
    ++pos;
    if (ch != '\\') {
      appendUtf8(out, ch);
      continue;
    }
    char32_t escape = at(pos);
    if (escape == kEnd)
      fail(begin, "the string is not closed");
    if (escape != 'u') {
      static const std::pair<char32_t, char> kEscapes[] = {
          {'"', '"'},  {'\'', '\''}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'},
          {'f', '\f'}, {'n', '\n'},  {'r', '\r'},  {'t', '\t'}};
      auto it = std::find_if(std::begin(kEscapes), std::end(kEscapes),
                             [&](const auto &e) { return e.first == escape; });
      if (it == std::end(kEscapes))
        fail(pos, "invalid escape \\" + printable(utf8(pos, pos + 1)) +
                      " in a string");
      out += it->second;
      ++pos;
      continue;
    }
    // hjson-py refuses a second character of x or X before int() sees it,
    // so "0x12" is not read as hex with a prefix; " 0x1" still is.
    size_t escapePos = pos - 1;
    auto hex = [&](size_t at) -> std::optional<long> {
      if (at + 4 > s.size() || s[at + 1] == 'x' || s[at + 1] == 'X')
        return std::nullopt;
      return pythonHex(s.data() + at);
    };
    std::optional<long> unit = hex(pos + 1);
    if (!unit)
      fail(escapePos,
           "invalid \\u escape: " +
               printable(utf8(escapePos, std::min(pos + 5, s.size()))));
    long code = *unit;
    pos += 5;
    // A high surrogate joins a low one written right after it.
    if ((code & 0xfc00) == 0xd800 && at(pos) == '\\' && at(pos + 1) == 'u' &&
        pos + 6 <= s.size() && s[pos + 3] != 'x' && s[pos + 3] != 'X') {
      std::optional<long> low = pythonHex(s.data() + pos + 2);
      if (!low)
        fail(pos, "invalid \\u escape: " + printable(utf8(pos, pos + 6)));
      if ((*low & 0xfc00) == 0xdc00) {
        code = 0x10000 + (code - 0xd800) * 0x400 + (*low - 0xdc00);
        pos += 6;
      }
    }
    // Python's chr() raises ValueError on a negative code.
    if (code < 0)
      fail(escapePos,
           "invalid \\u escape: " + printable(utf8(escapePos, escapePos + 6)),
           false);
    // hjson-py keeps an unpaired surrogate, which UTF-8 cannot hold: it is
    // kept here too (as WTF-8), and refused if the document is accepted.
    if (code >= 0xd800 && code <= 0xdfff)
      unrepresentable(escapePos, "the \\u escape " +
                                     printable(utf8(escapePos, escapePos + 6)) +
                                     " is half of a UTF-16 surrogate pair");
    appendUtf8(out, static_cast<char32_t>(code));
  }
}

/// mlscanstring: a ''' string; `pos` is at its first quote. Each line loses
/// as much leading whitespace as there are characters before the ''' on its
/// line; a first line break right after the ''' and the last line break
/// before the closing ''' are dropped.
std::string Reader::multiline(size_t &pos) const {
  size_t start = pos;
  // hjson-py counts back to the previous "\n" with Python indexing, which
  // wraps past the start of the text: on the first line the count runs on
  // from the end of the text back to its last "\n", and with no "\n" at all
  // it fails with an IndexError.
  size_t indent;
  auto after = std::lower_bound(newlines.begin(), newlines.end(), pos);
  if (after != newlines.begin())
    indent = pos - 1 - *(after - 1);
  else if (!newlines.empty())
    indent = pos + (s.size() - 1 - newlines.back());
  else
    fail(pos, "a ''' string needs a line break somewhere in the file", false);

  pos = skipIndent(pos + 3, kNone);
  if (pos == s.size())
    fail(start, "the ''' string is not closed", false);
  if (s[pos] == '\n')
    pos = skipIndent(pos + 1, indent);

  std::string out;
  int quotes = 0;
  while (true) {
    char32_t ch = at(pos);
    if (ch == kEnd)
      fail(start, "the ''' string is not closed");
    if (ch == '\'') {
      ++pos;
      if (++quotes == 3) {
        if (!out.empty() && out.back() == '\n')
          out.pop_back();
        return out;
      }
      continue;
    }
    out.append(quotes, '\'');
    quotes = 0;
    if (ch == '\n') {
      out += '\n';
      pos = skipIndent(pos + 1, indent);
    } else {
      if (ch != '\r')
        appendUtf8(out, ch);
      ++pos;
    }
  }
}

/// scantfnns: a value without quotes. At each character that could end a
/// value (end of line, ',', '}', ']', a comment) the text so far is taken
/// if it is null, true, false or a number; otherwise the value is the
/// whole rest of the line, stripped.
json Reader::quoteless(size_t &pos) {
  char32_t first = skipSpace(pos);
  size_t begin = pos;
  if (isPunctuator(first))
    fail(pos, "found " + describe(first) +
                  " where a value was expected (put a string starting with "
                  "{}[],: in quotes)");

  // The literal the text may be, and the last place it may end: the text
  // must be the literal followed by nothing but whitespace.
  static const std::pair<char32_t, std::u32string> kLiterals[] = {
      {'n', U"null"}, {'t', U"true"}, {'f', U"false"}};
  const std::u32string *literal = nullptr;
  for (const auto &[initial, word] : kLiterals)
    if (first == initial && s.compare(begin, word.size(), word) == 0)
      literal = &word;
  size_t literalFrom = kNone, literalTo = kNone;
  if (literal) {
    literalFrom = begin + literal->size();
    literalTo = literalFrom;
    while (literalTo < s.size() && isPythonSpace(s[literalTo]) &&
           s[literalTo] != '\n' && s[literalTo] != '\r')
      ++literalTo;
  }

  // NUMBER_RE matched at `begin`: the number ends at numberEnd, the match
  // (trailing spaces and tabs included) at matchEnd.
  size_t numberEnd = kNone, matchEnd = kNone;
  if (first == '-' || isDigit(first)) {
    size_t p = begin + (first == '-' ? 1 : 0);
    bool integer = true;
    if (at(p) == '0') {
      ++p;
    } else if (isDigit(at(p))) {
      while (isDigit(at(p)))
        ++p;
    } else {
      integer = false;
    }
    if (integer) {
      if (at(p) == '.' && isDigit(at(p + 1))) {
        p += 2;
        while (isDigit(at(p)))
          ++p;
      }
      if (at(p) == 'e' || at(p) == 'E') {
        size_t q = p + 1;
        if (at(q) == '+' || at(q) == '-')
          ++q;
        if (isDigit(at(q))) {
          p = q;
          while (isDigit(at(p)))
            ++p;
        }
      }
      numberEnd = p;
      while (at(p) == ' ' || at(p) == '\t')
        ++p;
      matchEnd = p;
    }
  }

  for (size_t end = begin;; ++end) {
    char32_t ch = at(end);
    bool eol = ch == '\r' || ch == '\n' || ch == kEnd;
    bool stop = eol || ch == ',' || ch == '}' || ch == ']' || ch == '#' ||
                (ch == '/' && (at(end + 1) == '/' || at(end + 1) == '*'));
    if (!stop)
      continue;
    if (literal && end >= literalFrom && end <= literalTo) {
      pos = end;
      return first == 'n' ? json(nullptr) : json(first == 't');
    }
    if (matchEnd == end) {
      pos = end;
      return number(begin, numberEnd);
    }
    if (eol) {
      pos = end;
      return strip(begin, end, /*leading=*/true);
    }
  }
}

/// The number s[begin:end], typed as nlohmann::json::parse types it
/// (hjson-py makes a float with an integral value under 1e10 an int, which
/// compares equal). Beyond a double hjson-py raises OverflowError for
/// floats and keeps integers; neither fits a json value.
json Reader::number(size_t begin, size_t end) {
  std::string token = utf8(begin, end);
  json result = json::parse(token, nullptr, /*allow_exceptions=*/false);
  if (result.is_discarded()) {
    std::string message = "the number " + printable(token) + " is out of range";
    if (token.find_first_of(".eE") != std::string::npos)
      fail(begin, message, false);
    unrepresentable(begin, message);
  }
  return result;
}

/// "PATH:LINE:COLUMN" for a character position.
std::string location(const std::string &path, const std::u32string &text,
                     size_t pos) {
  size_t line = 1, lineStart = 0;
  for (size_t i = 0; i < pos && i < text.size(); ++i)
    if (text[i] == '\n') {
      ++line;
      lineStart = i + 1;
    }
  return path + ":" + std::to_string(line) + ":" +
         std::to_string(pos - lineStart + 1);
}

} // namespace

json parseHjson(const std::string &path, const std::string &text) {
  std::u32string chars;
  size_t badByte = decodeText(text, chars);
  if (badByte != kNone) {
    static const char kHex[] = "0123456789abcdef";
    unsigned char b = static_cast<unsigned char>(text[badByte]);
    throw Error(location(path, chars, chars.size()) + ": byte 0x" +
                kHex[b >> 4] + kHex[b & 15] +
                " is not UTF-8 (DeepSpeed reads configs as UTF-8)");
  }
  try {
    return Reader(chars).document();
  } catch (const Failure &failure) {
    throw Error(location(path, chars, failure.pos) + ": " + failure.message);
  }
}

} // namespace ztc::rt
