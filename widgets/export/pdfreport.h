#pragma once
// The exported report as PDF pages (Exporter::exportReport), painted from core's report blocks.

#include "core/report/document.h"

#include <QImage>
#include <QString>
#include <map>
#include <string>
#include <vector>

namespace shardwidgets {

// Writes `blocks` to the PDF `file` (A4, portrait unless a table needs landscape), with
// `pictures` by their block source names, `title` as the document title and `footer` on every
// page beside "page n of N". False when the PDF writer cannot open the file.
bool writeReportPdf(const QString& file, const std::vector<shardscope::ReportBlock>& blocks,
                    const std::map<std::string, QImage>& pictures, const QString& title, const QString& footer);

} // namespace shardwidgets
