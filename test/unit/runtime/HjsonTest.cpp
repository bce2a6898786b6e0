//===- HjsonTest.cpp - reading Hjson as DeepSpeed does --------------------===//
//
// Each form hjson-py 3.1.0 accepts (optional root braces, separators,
// comments, keys, every kind of value and the rule that makes a quoteless
// value a number or a string), its quirks, the errors with their lines and
// columns, duplicate keys, the depth limit, agreement with
// nlohmann::json::parse on strict JSON, and the cases recorded from hjson-py
// itself in test/fixtures/deepspeed/hjson.json.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Hjson.h"

#include "TestUtil.h"
#include "runtime/Error.h"

#include <fstream>
#include <sstream>

using namespace ztc::rt;
using nlohmann::json;

namespace {

json parse(const std::string &text) { return parseHjson("ds.hjson", text); }

std::string error(const std::string &text) {
  return ZTC_ERROR_MESSAGE(parse(text));
}

} // namespace

TEST(HjsonTest, RootBracesAreOptional) {
  json expected = {{"a", 1}, {"b", "two"}};
  EXPECT_EQ(parse("a: 1\nb: two\n"), expected);
  EXPECT_EQ(parse("{a: 1\nb: two\n}"), expected);
  EXPECT_EQ(parse("\n\n  a: 1\n  b: two"), expected);
}

TEST(HjsonTest, BlankOrCommentOnlyTextIsAnEmptyObject) {
  EXPECT_EQ(parse(""), json::object());
  EXPECT_EQ(parse(" \n\t\n"), json::object());
  EXPECT_EQ(parse("# a\n// b\n/* c */\n"), json::object());
}

TEST(HjsonTest, MembersAreSeparatedByCommasOrNewlines) {
  json expected = {{"a", 1}, {"b", 2}, {"c", {1, 2, 3}}};
  EXPECT_EQ(parse("{\n  a: 1\n  b: 2,\n  c: [\n    1\n    2,\n    3,\n  ],\n}"),
            expected);
  EXPECT_EQ(parse("{a: 1, b: 2, c: [1, 2, 3,],}"), expected);
  // After a quoted or bracketed value, nothing at all needs to follow: one
  // of the corpus configs misses a comma after "}" and DeepSpeed reads it.
  EXPECT_EQ(parse(R"({"a": "x" "b": {"c": 1} "d": [1] "e": 2})"),
            json({{"a", "x"}, {"b", {{"c", 1}}}, {"d", {1}}, {"e", 2}}));
  EXPECT_EQ(parse(R"(["x" "y"])"), json({"x", "y"}));
}

TEST(HjsonTest, CommentsGoWhereWhitespaceGoes) {
  json expected = {{"a", 1}, {"b", {true, nullptr}}, {"c", "x"}};
  EXPECT_EQ(parse("# top\n"
                  "{ // after the brace\n"
                  "  /* before a key */ a: /* before a value */ 1 # after\n"
                  "  b: [ true // after a literal\n"
                  "       null /* after a literal */ ]\n"
                  "  \"c\" /* between a quoted key and ':' */ : \"x\"\n"
                  "} // the end\n"),
            expected);
}

TEST(HjsonTest, KeysAreQuotedOrQuoteless) {
  EXPECT_EQ(parse(R"({"a b": 1, 'c"d': 2, e-f.g_h: 3, é: 4, "": 5})"),
            json({{"a b", 1}, {"c\"d", 2}, {"e-f.g_h", 3}, {"é", 4}, {"", 5}}));
  // Whitespace may come between a quoteless key and its ':' only.
  EXPECT_EQ(parse("key   : 1\nnext\n: 2"), json({{"key", 1}, {"next", 2}}));
  // '#' and '/' are key characters, not comments, inside a quoteless key.
  EXPECT_EQ(parse("a#b: 1\nc//d: 2"), json({{"a#b", 1}, {"c//d", 2}}));
}

TEST(HjsonTest, QuotedStrings) {
  EXPECT_EQ(parse(R"(a: "q\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00")")["a"],
            "q\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
  // Single quotes: the other quote needs no escape, and \' works in both.
  EXPECT_EQ(parse(R"(a: 'it\'s "x"')")["a"], "it's \"x\"");
  EXPECT_EQ(parse(R"(a: "it\'s 'x'")")["a"], "it's 'x'");
  // A quoted value ends the value: '#' after it is a comment again.
  EXPECT_EQ(parse("a: \"x\" # comment\nb: 'y', c: 1")["b"], "y");
}

TEST(HjsonTest, MultilineStringsLoseTheirIndent) {
  // The example of hjson's syntax page: each line loses as many leading
  // spaces as there are characters before the ''' on its line.
  EXPECT_EQ(parse("{\n"
                  "  md:\n"
                  "    '''\n"
                  "    First line.\n"
                  "    Second line.\n"
                  "      This line is indented by two spaces.\n"
                  "    '''\n"
                  "}\n")["md"],
            "First line.\nSecond line.\n  This line is indented by two "
            "spaces.");
  EXPECT_EQ(parse("a: '''one line'''\n")["a"], "one line");
  EXPECT_EQ(parse("a: '''  text\n     more\n   '''\n")["a"], "text\n  more");
  EXPECT_EQ(parse("a: '''it's ''quoted'' '''\n")["a"], "it's ''quoted'' ");
  // Windows line ends read as "\n", as Python's text mode reads them.
  EXPECT_EQ(parse("a:\r\n  '''\r\n  x\r\n  y\r\n  '''\r\n")["a"], "x\ny");
}

TEST(HjsonTest, QuotelessValuesRunToTheEndOfTheLine) {
  json config = parse("lr: auto\n"
                      "x: 3 apples\n"
                      "y: abc # not a comment\n"
                      "z: abc, d: 1\n"
                      "url: http://host/path  \t\n"
                      "m: -\n"
                      "n: 01\n"
                      "o: 1.\n"
                      "p: .5\n"
                      "q: true love\n"
                      "r: nulls\n");
  EXPECT_EQ(config["lr"], "auto");
  EXPECT_EQ(config["x"], "3 apples");
  EXPECT_EQ(config["y"], "abc # not a comment");
  EXPECT_EQ(config["z"], "abc, d: 1");
  EXPECT_EQ(config["url"], "http://host/path");
  EXPECT_EQ(config["m"], "-");
  EXPECT_EQ(config["n"], "01");
  EXPECT_EQ(config["o"], "1.");
  EXPECT_EQ(config["p"], ".5");
  EXPECT_EQ(config["q"], "true love");
  EXPECT_EQ(config["r"], "nulls");
  // A '}' is part of such a value, so this object is never closed.
  EXPECT_EQ(error("{a: b}"),
            "ds.hjson:1:7: the file ends inside an object (a '}' is missing, "
            "or a quoteless value took it: those run to the end of the line)");
}

TEST(HjsonTest, NumbersAndLiteralsEndAtCommasBracketsAndComments) {
  json config = parse("a: 3 # c\n"
                      "b: 4, c: 5\n"
                      "d: true // c\n"
                      "e: null /* c */\n"
                      "f: false   \n"
                      "g: [1,2 ,-3]\n"
                      "h: {i: 1.5e3}\n");
  EXPECT_EQ(config, json({{"a", 3},
                          {"b", 4},
                          {"c", 5},
                          {"d", true},
                          {"e", nullptr},
                          {"f", false},
                          {"g", {1, 2, -3}},
                          {"h", {{"i", 1500.0}}}}));
}

TEST(HjsonTest, NumbersAreTypedAsJsonTypesThem) {
  const char *numbers[] = {"0",
                           "-0",
                           "7",
                           "-7",
                           "1.0",
                           "-0.0",
                           "2e8",
                           "1E+2",
                           "1e-400",
                           "9223372036854775807",
                           "9223372036854775808",
                           "-9223372036854775808",
                           "18446744073709551615",
                           "18446744073709551616",
                           "-9223372036854775809",
                           "0.1",
                           "1.7976931348623157e308"};
  for (const char *number : numbers) {
    json strict = json::parse(number);
    json mine = parse(std::string("a: ") + number + "\n")["a"];
    EXPECT_EQ(mine.type(), strict.type()) << number;
    EXPECT_EQ(mine.dump(), strict.dump()) << number;
  }
  EXPECT_TRUE(parse("a: 8")["a"].is_number_unsigned());
  EXPECT_TRUE(parse("a: -8")["a"].is_number_integer());
  EXPECT_TRUE(parse("a: 8.0")["a"].is_number_float());
}

TEST(HjsonTest, NumbersBeyondADoubleAreErrors) {
  EXPECT_EQ(error("a: 1e400"),
            "ds.hjson:1:4: the number 1e400 is out of range");
  EXPECT_EQ(error("a: [1, -1.5e999]"),
            "ds.hjson:1:8: the number -1.5e999 is out of range");
  EXPECT_EQ(error("a: " + std::string(400, '9')).substr(0, 31),
            "ds.hjson:1:4: the number 999999");
}

TEST(HjsonTest, RootMayBeASingleValue) {
  EXPECT_EQ(parse("5"), json(5));
  EXPECT_EQ(parse(" \"s\" "), json("s"));
  EXPECT_EQ(parse("true"), json(true));
  EXPECT_EQ(parse("[1]"), json({1}));
  // hjson-py tries an object without braces first, then a single value: a
  // line that is not a member is a quoteless string.
  EXPECT_EQ(parse("hello world"), json("hello world"));
  EXPECT_EQ(parse("a: \"unclosed\n"), json("a: \"unclosed"));
}

TEST(HjsonTest, HjsonPyQuirks) {
  // A byte order mark is skipped, but then an empty text is an error.
  EXPECT_EQ(parse("\xef\xbb\xbf{a: 1}"), json({{"a", 1}}));
  EXPECT_EQ(error("\xef\xbb\xbf"),
            "ds.hjson:1:2: the file ends where a key and its ':' were "
            "expected");
  // A ''' string on the first line takes its indent from the last line.
  EXPECT_EQ(parse("a: '''\n   x\n   '''\n  ")["a"], "x");
  EXPECT_EQ(error("a: '''x'''"),
            "ds.hjson:1:4: a ''' string needs a line break somewhere in the "
            "file");
  // A lone "\r" is a line break, as in Python's text mode.
  EXPECT_EQ(parse("a: 1\rb: x\r"), json({{"a", 1}, {"b", "x"}}));
  // The separators \x1c-\x1f and U+00A0 are whitespace to Python's strip().
  EXPECT_EQ(parse("a: \xc2\xa0x\x1f\n")["a"], "x");
  EXPECT_EQ(parse("a: null\x0c\n")["a"], nullptr);
}

TEST(HjsonTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error("a: 1\nb c: 2\n"),
            "ds.hjson:2:2: whitespace in the key \"b c\" (put a key with "
            "spaces in quotes)");
  EXPECT_EQ(error("{\n  a: 1\n  b 2\n}"),
            "ds.hjson:3:5: expected ':' after the key \"b\", found '2'");
  EXPECT_EQ(error("{\"a\" 1}"),
            "ds.hjson:1:6: expected ':' after the key \"a\", found '1'");
  EXPECT_EQ(error("[1, 2"),
            "ds.hjson:1:6: the file ends inside an array (a ']' is missing, "
            "or a quoteless value took it: those run to the end of the line)");
  EXPECT_EQ(error("{a, b}"),
            "ds.hjson:1:3: found ',' where a key was expected (put a key with "
            "{}[],: or spaces in quotes)");
  EXPECT_EQ(error("{a: [1, }"),
            "ds.hjson:1:9: found '}' where a value was expected (put a string "
            "starting with {}[],: in quotes)");
  EXPECT_EQ(error("{:1}"), "ds.hjson:1:2: ':' without a key before it (an "
                           "empty key is written \"\")");
  EXPECT_EQ(error("{a: 1}}"),
            "ds.hjson:1:7: unexpected '}' after the end of the document");
  EXPECT_EQ(error("a: 1\n/* open"),
            "ds.hjson:2:1: the /* comment is not closed");
  EXPECT_EQ(error("{a: \"x\ty\"}"),
            "ds.hjson:1:7: control character '\\x09' in a string (write it as "
            "an escape)");
  EXPECT_EQ(error("{a: \"\\q\"}"),
            "ds.hjson:1:7: invalid escape \\q in a string");
  EXPECT_EQ(error("{a: \"\\u12\"}"),
            "ds.hjson:1:6: invalid \\u escape: \\u12\"}");
  EXPECT_EQ(error("{a: \"\\ud800\"}"),
            "ds.hjson:1:6: the \\u escape \\ud800 is half of a UTF-16 "
            "surrogate pair");
  EXPECT_EQ(error("{a: 'x}"), "ds.hjson:1:5: the string is not closed");
  EXPECT_EQ(error("x:\n  '''\n  unclosed"),
            "ds.hjson:2:3: the ''' string is not closed");
  // Columns count characters, not bytes.
  EXPECT_EQ(error("{é: 1, ü}"),
            "ds.hjson:1:9: found '}' where a key was expected (put a key with "
            "{}[],: or spaces in quotes)");
  EXPECT_EQ(error("a: \"x\xff\""),
            "ds.hjson:1:6: byte 0xff is not UTF-8 (DeepSpeed reads configs as "
            "UTF-8)");
  EXPECT_EQ(error("a: \xed\xa0\x80"),
            "ds.hjson:1:4: byte 0xed is not UTF-8 (DeepSpeed reads configs as "
            "UTF-8)");
  // File text in a message is printable and on one line.
  EXPECT_EQ(error("{a\x01\n b}"),
            "ds.hjson:2:2: expected ':' after the key \"a\\x01\", found 'b'");
}

TEST(HjsonTest, DuplicateKeysAreErrors) {
  const std::string suffix =
      " appears twice in one object (DeepSpeed refuses that too)";
  EXPECT_EQ(error("a: 1\nb: 2\na: 3\n"),
            "ds.hjson:3:1: the key \"a\"" + suffix);
  EXPECT_EQ(error("{\"lr\": 1, 'lr': 2}"),
            "ds.hjson:1:11: the key \"lr\"" + suffix);
  EXPECT_EQ(error("{\"o\": {\"p\": {\"x\": 1, \"x\": 1}}}"),
            "ds.hjson:1:22: the key \"x\"" + suffix);
  EXPECT_EQ(error("a: [{x: 1}, {x: 1, y: 2, x: 3}]"),
            "ds.hjson:1:26: the key \"x\"" + suffix);
  // The same key in different objects is fine.
  EXPECT_EQ(parse("a: {x: 1}\nb: {x: 2}"),
            json({{"a", {{"x", 1}}}, {"b", {{"x", 2}}}}));
  // Python's == on the decoded keys: an escape spells the same key.
  EXPECT_EQ(error("{\"\\u0061\": 1, a: 2}"),
            "ds.hjson:1:15: the key \"a\"" + suffix);
}

TEST(HjsonTest, DeepNestingIsAnErrorNotACrash) {
  auto nested = [](size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  };
  EXPECT_EQ(parse(nested(512)).dump().size(), 1024u);
  EXPECT_EQ(error(nested(513)),
            "ds.hjson:1:513: arrays and objects nest deeper than 512 levels");
  EXPECT_EQ(error(std::string(1 << 20, '[')),
            "ds.hjson:1:513: arrays and objects nest deeper than 512 levels");
  std::string objects;
  for (int i = 0; i < 600; ++i)
    objects += "{a:";
  EXPECT_EQ(error(objects).substr(0, 16), "ds.hjson:1:1537:");
}

TEST(HjsonTest, StrictJsonReadsAsNlohmannReadsIt) {
  const char *documents[] = {
      R"({})",
      R"([])",
      R"({"a": 1, "b": [1, -2, 3.5, 1e2, 1E-2, -0, 0.0], "c": {"d": null}})",
      R"({"s": "\u0041\u00e9\u20ac\ud83d\ude00 \" \\ \/ \b\f\n\r\t", "e": ""})",
      R"([true, false, null, "null", [[], [{}]], {"x": [{"y": "z"}]}])",
      R"({"big": 18446744073709551615, "bigger": 18446744073709551616,
          "neg": -9223372036854775808, "negger": -9223372036854775809,
          "tiny": 5e-324, "under": 1e-400, "max": 1.7976931348623157e308})",
      "\t\r\n {\"ws\" \t:\r\n 1 \r\n, \"x\":[ 1 ,2\t]\t}\n",
      R"("only a string")",
      R"(42)",
      R"(-1.25e-7)",
      R"(null)",
      R"({"zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8,
          "offload_param": {"device": "cpu", "pin_memory": true}},
          "fp16": {"enabled": "auto", "loss_scale": 0}})",
  };
  for (const char *document : documents) {
    json strict = json::parse(document);
    json mine = parse(document);
    EXPECT_EQ(mine, strict) << document;
    EXPECT_EQ(mine.dump(), strict.dump()) << document;
  }
}

/// Cases recorded from hjson-py 3.1.0 with DeepSpeed's duplicate-key hook
/// (test/fixtures/deepspeed/hjson.json): the value when hjson accepts the
/// text, an Error when it refuses it.
TEST(HjsonTest, AgreesWithHjsonPy) {
  std::string path =
      std::string(ZTC_TEST_FIXTURES_DIR) + "/deepspeed/hjson.json";
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "cannot open " << path;
  std::stringstream buffer;
  buffer << in.rdbuf();
  json cases = json::parse(buffer.str());
  ASSERT_TRUE(cases.is_array());
  ASSERT_FALSE(cases.empty());
  for (const json &c : cases) {
    std::string name = c.at("name").get<std::string>();
    std::string text = c.at("text").get<std::string>();
    bool refused =
        c.contains("error") && !c["error"].is_null() && c["error"] != false;
    json value;
    std::string message = ZTC_ERROR_MESSAGE(value = parse(text));
    if (refused) {
      EXPECT_NE(message, "")
          << name << ": hjson-py refuses it, ztc reads " << value.dump();
      continue;
    }
    EXPECT_EQ(message, "") << name;
    if (message.empty()) {
      EXPECT_EQ(value, c.at("value")) << name;
    }
  }
}
