#include <geom/shapes.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::cerr << "usage: geomcli SHAPES_FILE\n";
        return 2;
    }
    std::ifstream in(argv[1]);
    if (!in) {
        std::cerr << "cannot open " << argv[1] << "\n";
        return 1;
    }
    std::string line;
    long count = 0, skipped = 0;
    double total_area = 0, total_perimeter = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#')
            continue;
        auto shape = geom::parse_shape(line);
        if (!shape) {
            skipped++;
            continue;
        }
        count++;
        total_area += geom::area(*shape);
        total_perimeter += geom::perimeter(*shape);
    }
    std::printf("count: %ld\nskipped: %ld\ntotal_area: %.3f\ntotal_perimeter: %.3f\n", count,
                skipped, total_area, total_perimeter);
    return 0;
}
