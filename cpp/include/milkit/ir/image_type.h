// milkit/ir/image_type.h - image inputs and outputs of a function (coremltools' ct.ImageType).
//
// Core ML hands an image input to the program as a tensor (1, C, H, W): fp32 pixel values 0..255
// in RGB or BGR channel order, or one channel (GRAYSCALE fp32, GRAYSCALE_FLOAT16 fp16). The
// program-side preprocessing coremltools inserts (NHWC -> NCHW transpose, scale, bias) is kept
// here until the passes common::image_input_preprocess and
// mil_backend::insert_image_preprocessing_ops turn it into ops; the serializer writes the
// model description's imageType from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace milkit {

/// The pixel layout of an image feature (coremltools' ct.colorlayout, Core ML's ColorSpace).
enum class ColorLayout { RGB, BGR, Grayscale, GrayscaleFloat16 };

/// coremltools' value of the layout: "RGB", "BGR", "G", "G_FLOAT16".
const char* color_layout_name(ColorLayout c);

/// Parses "RGB", "BGR", "G" / "GRAYSCALE", "G_FLOAT16" / "GRAYSCALE_FLOAT16"; ValueError otherwise.
ColorLayout parse_color_layout(const std::string& s);

/// Channels of the layout: 3 (RGB, BGR) or 1 (grayscale).
int color_channels(ColorLayout c);

/// An image input of a function (coremltools' ImageType in Function.input_types).
struct ImageInput {
  /// Index of the input in Function::inputs().
  size_t input = 0;
  /// How Core ML fills the tensor.
  ColorLayout color_layout = ColorLayout::RGB;
  /// Multiplies the pixels (mil_backend::insert_image_preprocessing_ops: a "<input>__scaled__"
  /// mul).
  double scale = 1.0;
  /// Added after scaling, one value per channel (1 for grayscale, 3 for RGB / BGR); empty: none
  /// ("<input>__biased__" add).
  std::vector<double> bias;
  /// false: the program reads the input as NHWC; common::image_input_preprocess makes the input
  /// NCHW and puts a transpose "<input>__transpose_from_nchw__" in front of its uses.
  bool channel_first = true;
  /// Allowed shapes (coremltools' EnumeratedShapes), in the input's layout; empty: none. Written as
  /// the imageType's enumeratedSizes when the input's shape is symbolic.
  std::vector<std::vector<int64_t>> enumerated_shapes;
  /// The shape default (RangeDim defaults, EnumeratedShapes default); written as width and height
  /// when the input's shape is symbolic. Empty: each symbol's lower bound.
  std::vector<int64_t> default_shape;
};

/// An image output of a function (coremltools' ImageType in Function.output_types).
struct ImageOutput {
  /// Index of the output in the function body's outputs.
  size_t output = 0;
  /// How Core ML reads the tensor (1, C, H, W) as an image.
  ColorLayout color_layout = ColorLayout::RGB;
};

}  // namespace milkit
