// Python bindings of MIL text: printing with options, and parsing text back into a Program.
#include "common.h"

#include <optional>

#include "milkit/serde/text.h"
#include "milkit/serde/text_parser.h"
#include "milkit/types/error.h"

namespace milkit::py_bind {

void init_text(py::module_& m) {
  m.def(
      "parse_program",
      [](const std::string& text) {
        std::shared_ptr<Program> p;
        {
          py::gil_scoped_release release;
          p = parse_program(text);
        }
        return p;
      },
      py::arg("text"), "Parses MIL text (as printed by print(prog)) back into a Program.");
  m.def(
      "program_to_text",
      [](const Program& p, bool consts, std::optional<int64_t> max_const_elems) {
        ProgramTextOptions o;
        o.consts = consts;
        if (max_const_elems) {
          if (*max_const_elems < 0) throw ValueError("max_const_elems must be >= 0, got " + std::to_string(*max_const_elems));
          o.max_const_elems = static_cast<size_t>(*max_const_elems);
        }
        return program_to_text(p, o);
      },
      py::arg("program"), py::arg("consts") = false, py::arg("max_const_elems") = py::none(),
      "Prints a program; consts=True also prints every const with its exact value.");
}

}  // namespace milkit::py_bind
