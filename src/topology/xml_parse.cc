// A deliberately small XML reader/writer: enough for the topology schema, strict
// about everything else, and precise about where input went wrong.
#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "src/debug/error.h"
#include "src/topology/xml.h"

namespace gyre::topo {
namespace {

constexpr int kMaxDepth = 64;  // far deeper than any PCI tree; stops runaway recursion on bad input

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':';
}

class Parser {
 public:
  Parser(const std::string& text, const std::string& origin) : s_(text), origin_(origin) {}

  ncclResult_t document(XmlElement* root) {
    GYRE_CHECK(skipMisc());
    if (pos_ >= s_.size()) return error("the file has no root element");
    if (s_[pos_] != '<') return error("expected '<' to start the root element");
    GYRE_CHECK(element(root, 0));
    GYRE_CHECK(skipMisc());
    if (pos_ < s_.size()) return error("unexpected content after the root element </%s>", root->name.c_str());
    return ncclSuccess;
  }

 private:
  const std::string& s_;
  const std::string& origin_;
  size_t pos_ = 0;
  int line_ = 1;

  ncclResult_t error(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return fail(ncclInvalidUsage, "%s:%d: %s", origin_.c_str(), line_, msg);
  }

  bool startsWith(const char* p) const { return s_.compare(pos_, strlen(p), p) == 0; }
  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_)
      if (s_[pos_] == '\n') ++line_;
  }
  void skipSpace() {
    while (pos_ < s_.size() && isspace(static_cast<unsigned char>(s_[pos_]))) advance(1);
  }
  ncclResult_t skipUntil(const char* end, const char* what) {
    int startLine = line_;
    size_t found = s_.find(end, pos_);
    if (found == std::string::npos) {
      line_ = startLine;
      return error("%s is never closed (missing \"%s\")", what, end);
    }
    advance(found + strlen(end) - pos_);
    return ncclSuccess;
  }
  // Whitespace, comments, processing instructions and DOCTYPE between elements.
  ncclResult_t skipMisc() {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) GYRE_CHECK(skipUntil("-->", "a comment"));
      else if (startsWith("<?")) GYRE_CHECK(skipUntil("?>", "a <? ?> declaration"));
      else if (startsWith("<!DOCTYPE")) GYRE_CHECK(skipUntil(">", "a DOCTYPE"));
      else return ncclSuccess;
    }
  }

  ncclResult_t name(std::string* out, const char* what) {
    size_t start = pos_;
    while (pos_ < s_.size() && isNameChar(s_[pos_])) ++pos_;
    if (pos_ == start) {
      if (pos_ >= s_.size()) return error("the file ends where %s was expected", what);
      return error("expected %s, found '%c'", what, s_[pos_]);
    }
    *out = s_.substr(start, pos_ - start);
    return ncclSuccess;
  }

  ncclResult_t entity(std::string* out) {
    size_t semi = s_.find(';', pos_);
    if (semi == std::string::npos || semi - pos_ > 10) return error("'&' does not start an entity (write &amp;)");
    std::string ent = s_.substr(pos_ + 1, semi - pos_ - 1);
    if (ent == "lt") *out += '<';
    else if (ent == "gt") *out += '>';
    else if (ent == "amp") *out += '&';
    else if (ent == "quot") *out += '"';
    else if (ent == "apos") *out += '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      char* end = nullptr;
      long code = ent[1] == 'x' ? strtol(ent.c_str() + 2, &end, 16) : strtol(ent.c_str() + 1, &end, 10);
      if (*end != '\0' || code <= 0 || code > 127) return error("unsupported character reference &%s;", ent.c_str());
      *out += static_cast<char>(code);
    } else {
      return error("unknown entity &%s;", ent.c_str());
    }
    advance(semi + 1 - pos_);
    return ncclSuccess;
  }

  ncclResult_t attrValue(std::string* out) {
    if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return error("attribute values must be quoted");
    char quote = s_[pos_];
    advance(1);
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] == '<') return error("'<' inside an attribute value (write &lt;)");
      if (s_[pos_] == '&') GYRE_CHECK(entity(out));
      else {
        *out += s_[pos_];
        advance(1);
      }
    }
    if (pos_ >= s_.size()) return error("attribute value is never closed");
    advance(1);
    return ncclSuccess;
  }

  ncclResult_t element(XmlElement* e, int depth) {
    if (depth > kMaxDepth) return error("elements nest deeper than %d", kMaxDepth);
    e->line = line_;
    advance(1);  // '<'
    GYRE_CHECK(name(&e->name, "an element name"));
    for (;;) {
      size_t before = pos_;
      skipSpace();
      if (pos_ >= s_.size()) return error("the file ends inside <%s>", e->name.c_str());
      if (startsWith("/>")) {
        advance(2);
        return ncclSuccess;
      }
      if (s_[pos_] == '>') {
        advance(1);
        break;
      }
      if (pos_ == before) return error("expected whitespace, '>' or '/>' in <%s>", e->name.c_str());
      std::string key, value;
      GYRE_CHECK(name(&key, "an attribute name"));
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=') return error("expected '=' after attribute %s", key.c_str());
      advance(1);
      skipSpace();
      GYRE_CHECK(attrValue(&value));
      if (e->attr(key)) return error("attribute %s appears twice in <%s>", key.c_str(), e->name.c_str());
      e->set(key, value);
    }
    // Content: child elements, comments and whitespace until the end tag.
    for (;;) {
      GYRE_CHECK(skipMisc());
      if (pos_ >= s_.size()) return error("<%s> (line %d) is never closed", e->name.c_str(), e->line);
      if (startsWith("</")) {
        advance(2);
        std::string closing;
        GYRE_CHECK(name(&closing, "an element name"));
        if (closing != e->name)
          return error("</%s> closes <%s> opened on line %d", closing.c_str(), e->name.c_str(), e->line);
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return error("expected '>' to end </%s>", closing.c_str());
        advance(1);
        return ncclSuccess;
      }
      if (s_[pos_] != '<') return error("unexpected text inside <%s> (only elements belong here)", e->name.c_str());
      e->children.emplace_back();
      GYRE_CHECK(element(&e->children.back(), depth + 1));
    }
  }
};

void escapeInto(const std::string& v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '<': *out += "&lt;"; break;
      case '>': *out += "&gt;"; break;
      case '&': *out += "&amp;"; break;
      case '"': *out += "&quot;"; break;
      default: *out += c;
    }
  }
}

void writeElement(const XmlElement& e, int depth, std::string* out) {
  out->append(depth * 2, ' ');
  *out += "<" + e.name;
  for (const auto& [k, v] : e.attrs) {
    *out += " " + k + "=\"";
    escapeInto(v, out);
    *out += "\"";
  }
  if (e.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const XmlElement& c : e.children) writeElement(c, depth + 1, out);
  out->append(depth * 2, ' ');
  *out += "</" + e.name + ">\n";
}

}  // namespace

const std::string* XmlElement::attr(const std::string& key) const {
  for (const auto& kv : attrs)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

ncclResult_t parseXml(const std::string& text, const std::string& origin, XmlElement* root) {
  *root = XmlElement();
  Parser p(text, origin);
  return p.document(root);
}

std::string writeXml(const XmlElement& root) {
  std::string out = "<?xml version=\"1.0\"?>\n";
  writeElement(root, 0, &out);
  return out;
}

}  // namespace gyre::topo
