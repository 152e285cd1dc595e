# The dependency rules of the layout (core/README.md), checked over the sources as text:
#   - core/ includes no Qt and nothing from widgets/ or app/;
#   - core/util/ includes nothing else from core/; core/pipeline/ only core/util/;
#   - core/inspect/ takes from core/pipeline/ only its profile headers (profile*.h);
#   - headers under core/*/internal/ are the core's own: widgets/ and app/ never include them;
#   - widgets/ includes nothing from app/;
#   - python/ (the extension module) uses the core's public headers only, and no Qt.
# Run as: cmake -DSOURCE_DIR=<repo> -P include_rules.cmake (ctest: tst_include_rules).
set(violations "")
function(check_folder folder regex why)
    file(GLOB_RECURSE sources "${SOURCE_DIR}/${folder}/*.h" "${SOURCE_DIR}/${folder}/*.cpp")
    foreach(source IN LISTS sources)
        file(STRINGS "${source}" lines REGEX "^[ \t]*#[ \t]*include")
        foreach(line IN LISTS lines)
            if(line MATCHES "${regex}")
                file(RELATIVE_PATH shown "${SOURCE_DIR}" "${source}")
                set(violations "${violations}\n  ${shown}: ${line} (${why})")
            endif()
        endforeach()
    endforeach()
    set(violations "${violations}" PARENT_SCOPE)
endfunction()

check_folder(core "#[ \t]*include[ \t]*<Q|\"widgets/|\"app/" "the core is Qt-free and below widgets and app")
check_folder(core/util "\"core/(checkpoint|run|foreign|pipeline|report)/" "core/util is the bottom layer")
check_folder(core/pipeline "\"core/(checkpoint|run|foreign|inspect|report)/" "core/pipeline includes only core/util")
check_folder(core/inspect "\"core/(run|report)/|\"core/pipeline/([^p]|p[^r]|pr[^o]|pro[^f]|prof[^i]|profi[^l]|profil[^e])"
             "core/inspect includes from core/pipeline only the profile headers (profile*.h)")
check_folder(widgets "\"core/[a-z_/]*internal/" "internal core header")
check_folder(app "\"core/[a-z_/]*internal/" "internal core header")
check_folder(widgets "\"app/" "widgets are below the apps")
check_folder(python "\"core/[a-z_/]*internal/|#[ \t]*include[ \t]*<Q|\"widgets/|\"app/" "the module binds the core's public API")

if(violations)
    message(FATAL_ERROR "include rules broken:${violations}")
endif()
message(STATUS "include rules hold")
