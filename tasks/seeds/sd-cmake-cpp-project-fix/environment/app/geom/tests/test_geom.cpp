#include <geom/shapes.hpp>

#include <cmath>
#include <cstdio>

static int failures = 0;

static void check(bool ok, const char *what)
{
    if (!ok) {
        std::printf("FAIL: %s\n", what);
        failures++;
    }
}

int main()
{
    auto r = geom::parse_shape("rect 3 4");
    check(r && geom::area(*r) == 12 && geom::perimeter(*r) == 14, "rect 3 4");
    auto t = geom::parse_shape("tri 3 4 5");
    check(t && std::fabs(geom::area(*t) - 6) < 1e-12, "tri 3 4 5");
    auto c = geom::parse_shape("circle 1");
    check(c && std::fabs(geom::area(*c) - 3.141592653589793) < 1e-12, "circle 1");
    check(!geom::parse_shape("tri 1 1 5"), "degenerate triangle rejected");
    check(!geom::parse_shape("rect 2"), "rect needs two sides");
    check(!geom::parse_shape("circle -1"), "negative radius rejected");
    check(!geom::parse_shape("hexagon 1"), "unknown shape rejected");
    std::printf(failures ? "%d failure(s)\n" : "all geom tests passed\n", failures);
    return failures ? 1 : 0;
}
