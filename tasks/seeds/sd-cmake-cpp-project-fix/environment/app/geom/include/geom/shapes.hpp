#pragma once
#include <optional>
#include <string>

namespace geom {

enum class Kind { Circle, Rect, Triangle };

struct Shape {
    Kind kind;
    double a = 0, b = 0, c = 0;
};

// Parses "circle R", "rect W H" or "tri A B C"; nullopt for anything invalid.
std::optional<Shape> parse_shape(const std::string &line);
double area(const Shape &s);
double perimeter(const Shape &s);

}  // namespace geom
