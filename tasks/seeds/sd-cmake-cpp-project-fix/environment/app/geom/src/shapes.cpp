#include <geom/shapes.hpp>

#include <sstream>
#include <vector>

namespace geom {

std::optional<Shape> parse_shape(const std::string &line)
{
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind))
        return std::nullopt;
    std::vector<double> v;
    std::string tok;
    while (in >> tok) {
        try {
            size_t used = 0;
            double d = std::stod(tok, &used);
            if (used != tok.size() || !(d > 0))
                return std::nullopt;
            v.push_back(d);
        } catch (...) {
            return std::nullopt;
        }
    }
    if (kind == "circle" && v.size() == 1)
        return Shape{Kind::Circle, v[0]};
    if (kind == "rect" && v.size() == 2)
        return Shape{Kind::Rect, v[0], v[1]};
    if (kind == "tri" && v.size() == 3) {
        if (v[0] + v[1] <= v[2] || v[0] + v[2] <= v[1] || v[1] + v[2] <= v[0])
            return std::nullopt;
        return Shape{Kind::Triangle, v[0], v[1], v[2]};
    }
    return std::nullopt;
}

}  // namespace geom
