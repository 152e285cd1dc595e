#pragma once
// `shardscope [PATH] [--profile FILE] [--schedule-csv FILE] [--reshard-to M] --export FILE [--export-view V]`: builds the
// same window without showing it, waits for the verification, writes the export and returns
// shardctl's exit codes (0 all good, 1 the checkpoint failed a check, 2 usage or environment
// error). A .png/.svg is one view (the pipeline timeline unless --export-view says otherwise), as
// the GUI's Export Timeline writes it. Needs no display.

#include <QString>
#include <QStringList>

struct HeadlessExport {
    QString path; // checkpoint; empty: a pipeline-only report
    QString profile; // layer-cost profile; empty: no pipeline section (a pipeline-only report: the demo's)
    QString file; // .pdf .html .md .json .png .svg
    int reshardTo = 0; // reshard preview's target world size; 0: twice the checkpoint's
    QString compare; // a second checkpoint to compare the first with; empty: no comparison
    QString view; // .png/.svg: "timeline" (empty: the same), "ownership" or "reshard"
    QString scheduleCsv; // a torch.distributed.pipelining CSV schedule for the planner; empty: none
};

// The names --export-view takes, for its help and its error.
QStringList headlessExportViews();

int runHeadlessExport(const HeadlessExport& request);
