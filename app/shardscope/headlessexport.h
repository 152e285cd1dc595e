#pragma once
// `shardscope [PATH] [--profile FILE] [--reshard-to M] --export FILE`: builds the same window without showing it,
// waits for the verification, writes the export and returns shardctl's exit codes (0 all good,
// 1 the checkpoint failed a check, 2 usage or environment error). Needs no display.

#include <QString>

struct HeadlessExport {
    QString path;    // checkpoint; empty: a pipeline-only report
    QString profile; // layer-cost profile; empty: the first bundled one
    QString file;    // .pdf .html .md .json .png .svg
    int reshardTo = 0; // reshard preview's target world size; 0: twice the checkpoint's
    QString compare;   // a second checkpoint to compare the first with; empty: no comparison
};

int runHeadlessExport(const HeadlessExport& request);
