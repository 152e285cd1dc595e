#pragma once
// Internal to core/report: the sections report_document (document.cpp) takes from
// inspect_sections.cpp.

#include "core/report/document.h"
#include "core/report/report.h"

#include <cstddef>
#include <vector>

namespace shardscope::report {

// The most rows a report's long tables (reshard targets, tensors) show; the rest is counted.
inline constexpr std::size_t kRowsShown = 64;

// The problems as one block: kind, then the sentence.
ReportBlock problems_block(const std::vector<Problem>& problems);
// The content-health verdict of a report about values alone (no verification in it).
ReportBlock content_verdict(const ContentReport& content);
// "Tensor content": the verdict when good, problems and warnings, the tensors holding NaN/Inf and,
// given the verification (may be null), those whose values came from files that failed it.
void content_section(const ContentReport& content, const VerifyReport* verify, std::vector<ReportBlock>& doc);
// "Comparison": with what, the verdict, problems, and the tensors that differ.
void diff_section(const DiffReport& diff, std::vector<ReportBlock>& doc);

} // namespace shardscope::report
