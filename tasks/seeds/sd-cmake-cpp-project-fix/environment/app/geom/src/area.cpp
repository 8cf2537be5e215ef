#include <geom/shapes.hpp>

#include <cmath>
#include <numbers>

namespace geom {

double area(const Shape &s)
{
    switch (s.kind) {
    case Kind::Circle:
        return std::numbers::pi * s.a * s.a;
    case Kind::Rect:
        return s.a * s.b;
    case Kind::Triangle: {
        double p = (s.a + s.b + s.c) / 2;
        return std::sqrt(p * (p - s.a) * (p - s.b) * (p - s.c));
    }
    }
    return 0;
}

double perimeter(const Shape &s)
{
    switch (s.kind) {
    case Kind::Circle:
        return 2 * std::numbers::pi * s.a;
    case Kind::Rect:
        return 2 * (s.a + s.b);
    case Kind::Triangle:
        return s.a + s.b + s.c;
    }
    return 0;
}

}  // namespace geom
