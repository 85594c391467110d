#include "milkit/ir/verify.h"

#include <unordered_set>

#include "milkit/builder/builder.h"
#include "milkit/types/error.h"

namespace milkit {

bool is_valid_identifier(const std::string& s) {
  if (s.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '@') return false;
  return true;
}

namespace {

struct Verifier {
  const Function& f;
  const std::string& fname;
  std::unordered_set<const Var*> defined;
  std::unordered_set<std::string> names;
  bool strict;

  [[noreturn]] void fail(const std::string& msg) const {
    throw VerifyError("function '" + fname + "': " + msg);
  }

  void define(const Var* v, bool shared_input = false) {
    if (!defined.insert(v).second) fail("var '" + v->name() + "' is defined twice");
    if (!strict || shared_input) return;
    if (!names.insert(v->name()).second) fail("name '" + v->name() + "' is used by two vars");
    if (!is_valid_identifier(v->name()))
      fail("var name '" + v->name() + "' is not a valid MIL identifier");
  }

  void block(const Block& b, std::vector<const Var*>& scope_added) {
    for (const Var* v : b.inputs()) {
      // while_loop's body block shares the cond block's inputs (already named there)
      define(v, v->input_of() != &b);
      scope_added.push_back(v);
    }
    size_t n = 0;
    for (const Operation* op = b.front(); op; op = op->next(), ++n) {
      if (op->erased()) fail(op->describe() + " is erased but still linked");
      if (op->parent() != &b) fail(op->describe() + " has a wrong parent block");
      for (size_t s = 0; s < op->args().size(); ++s) {
        const Var* v = op->args()[s];
        if (!defined.count(v))
          fail(op->describe() + ": input var '" + v->name() +
               "' is not defined before use in scope");
        bool found = false;
        for (const Use& u : v->uses())
          if (u.op == op && u.slot == s) found = true;
        if (!found) fail(op->describe() + ": use list of '" + v->name() + "' is missing this op");
      }
      for (const Block* nb : op->blocks()) {
        std::vector<const Var*> added;
        block(*nb, added);
        for (const Var* v : added) defined.erase(v);  // leave scope
      }
      if (op->op_type() == "const") {
        if (!op->output(0)->has_value()) fail(op->describe() + " has no value");
      } else {
        std::vector<const Type*> t = infer_types(const_cast<Operation*>(op));
        if (t.size() != op->outputs().size())
          fail(op->describe() + " has " + std::to_string(op->outputs().size()) +
               " outputs, inference gives " + std::to_string(t.size()));
        for (size_t i = 0; i < t.size(); ++i) {
          const Type* decl = op->outputs()[i]->type();
          if (decl != t[i] && !is_compatible_type(decl, t[i]))
            fail(op->describe() + ": output '" + op->outputs()[i]->name() + "' is declared " +
                 decl->str() + " but inference gives " + t[i]->str());
        }
      }
      if (strict && !is_valid_identifier(op->name()))
        fail("op name '" + op->name() + "' is not a valid MIL identifier");
      for (const Var* v : op->outputs()) {
        define(v);
        scope_added.push_back(v);
      }
    }
    if (n != b.size()) fail("block op count is inconsistent");
    for (const Var* v : b.outputs())
      if (!defined.count(v)) fail("block output '" + v->name() + "' is not defined in scope");
  }
};

}  // namespace

void verify(const Function& f, const std::string& name, bool strict_names) {
  Verifier v{f, name, {}, {}, strict_names};
  std::vector<const Var*> added;
  v.block(f.body(), added);
}

}  // namespace milkit
